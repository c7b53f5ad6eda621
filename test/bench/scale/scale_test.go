package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The test/bench module keeps to the standard library's testing (its
// go.mod is shared with the peer benchmark, which needs no testify).

func TestParseRefusesBadFlags(t *testing.T) {
	good := config{mode: "scale", create: "admin", queues: 8, msgs: 2, size: 128, concurrency: 16, newTopics: 1000,
		rate: 200, diskFrac: 0.7, baseline: 20 * time.Second, readyWait: time.Minute, stopWait: time.Minute}
	for _, tc := range []struct {
		name, topics, want string
		mod                func(*config)
	}{
		{"defaults", "50,500,1250", "", nil},
		{"zero topics", "0", "-topics", nil},
		{"not a number", "50,x", "-topics", nil},
		{"mode", "1", "-mode", func(c *config) { c.mode = "fast" }},
		{"create", "1", "-create", func(c *config) { c.create = "rpc" }},
		{"auto in scale", "1", "-create auto is for -mode newtopics", func(c *config) { c.create = "auto" }},
		{"queues", "1", "-queues", func(c *config) { c.queues = 0 }},
		{"too many queues", "1", "-queues", func(c *config) { c.queues = 5000 }},
		{"rate", "1", "-rate", func(c *config) { c.rate = 0 }},
		{"disk fraction", "1", "-disk-fraction", func(c *config) { c.diskFrac = 1.5 }},
		{"baseline", "1", "-baseline", func(c *config) { c.baseline = time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			if tc.mod != nil {
				tc.mod(&c)
			}
			err := c.parse(tc.topics)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("parse: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("parse: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestMeasureDiskCountsAllocatedBlocks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("block counts: Linux only")
	}
	store := t.TempDir()
	write := func(rel string, data []byte, size int64) {
		p := filepath.Join(store, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	write("consumequeue/T/0/00000000000000000000", make([]byte, 64<<10), 6<<20) // 6 MiB long, 64 KiB written
	write("index/20261206", nil, 4<<20)                                         // a hole
	write("commitlog/00000000000000000000", make([]byte, 128<<10), 128<<10)
	d, err := measureDisk(store)
	if err != nil {
		t.Fatal(err)
	}
	if d.cqFiles != 1 {
		t.Errorf("cqFiles %d, want 1", d.cqFiles)
	}
	// A file system may allocate a little more than what was written, never
	// the holes.
	if d.cq < 64<<10 || d.cq >= 1<<20 {
		t.Errorf("consume queue %d bytes on disk, want 64 KiB to 1 MiB of its 6 MiB length", d.cq)
	}
	if d.index >= 1<<20 {
		t.Errorf("index %d bytes on disk, want less than 1 MiB of its 4 MiB hole", d.index)
	}
	if d.commitlog < 128<<10 {
		t.Errorf("commit log %d bytes on disk, want at least 128 KiB", d.commitlog)
	}
	if d.total != d.cq+d.index+d.commitlog {
		t.Errorf("total %d, want the parts' sum %d", d.total, d.cq+d.index+d.commitlog)
	}
}

func TestQuantileNearestRank(t *testing.T) {
	ls := make([]time.Duration, 100)
	for i := range ls {
		ls[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := quantile(ls, tc.q); got != tc.want {
			t.Errorf("quantile(%g) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.99); got != 0 {
		t.Errorf("quantile of none = %v, want 0", got)
	}
}

func TestEstimateLearnsFromTheLastRun(t *testing.T) {
	e := defaultEstimate
	e.learn(diskUse{cq: 400 << 20, total: 3<<30 + 400<<20}, 100)
	if e.perQueue != 4<<20 || e.fixed != 3<<30 {
		t.Fatalf("estimate %+v, want 4 MiB a queue and 3 GiB besides", e)
	}
	if got := e.bytes(1000); got != 3<<30+4000<<20 {
		t.Fatalf("bytes(1000) = %d", got)
	}
}
