// Package fsx is the filesystem seam every store file goes through.
//
// FS and File cover what the commit log, consume queues, index and metadata
// need: create/open, fallocate, truncate, zero a range, mmap, msync, fdatasync,
// directory sync, rename and remove. Three implementations:
//
//   - OS, the real filesystem (golang.org/x/sys/unix: fallocate, mmap, msync,
//     fdatasync, statfs);
//   - WithFaults, a wrapper that fails chosen operations with a chosen error
//     (EIO, ENOSPC) on chosen paths, over any FS;
//   - MemFS, an in-memory filesystem that tracks what is durable and can
//     simulate a machine crash (Crash) or a process kill (Snapshot).
//
// All implementations are safe for concurrent use. A Mapping's Bytes may be
// written by one goroutine at a time per region, as with real memory.
package fsx
