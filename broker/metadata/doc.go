// Package metadata owns the broker's durable metadata: four JSON files in
// <storeRoot>/config, with RocketMQ's names and shapes. consumerOffset.json
// adds Gantry's clientOffsetTable (broadcast consumption: each client's own
// offsets), left out while it is empty; client ids may contain '@', so its
// keys are split from the left.
//
//	topics.json             {"topicConfigTable": {"<topic>": {...}}, "dataVersion": {...}}
//	subscriptionGroup.json  {"subscriptionGroupTable": {"<group>": {...}}, "dataVersion": {...}}
//	consumerOffset.json     {"offsetTable": {"<topic>@<group>": {"<queueId>": <offset>}},
//	                         "clientOffsetTable": {"<topic>@<group>@<clientId>": {"<queueId>": <offset>}}}
//	delayOffset.json        {"offsetTable": {"<delayLevel>": <offset>}}
//
// # Save protocol
//
// Save replaces a file durably and keeps the previous good version: if the
// current file parses as JSON and differs from the new content, it is first
// copied to <file>.bak; then the new content is written to <file>.tmp,
// fsynced, renamed over <file> and the directory fsynced (fsx.WriteFileAtomic,
// also used for the .bak). A crash at any instant therefore leaves <file>
// holding the old or the new version, and <file>.bak the one before, or the
// old one. Leftover .tmp files are ignored.
//
// # Fallback rule
//
// Files are decoded strictly (no unknown fields, no trailing data) and
// validated, so truncation, garbage and impossible values are detected. A
// file that is missing, empty or rejected is replaced by its .bak: Open logs
// a warning naming the file and the reason, records it in Report, and rewrites
// the main file at once. If a file and its backup are both unusable, Open
// fails with an error wrapping ErrDamaged that names both: the broker must
// never start silently with empty topics or offsets. Only when neither file
// exists (first start) do the tables start empty.
//
// # Concurrency
//
// Every method of Metadata is safe for concurrent use. Each table has its own
// RWMutex; no method holds two of them. Save holds a mutex of its own for its
// whole run (so two saves never write the same file at once) and takes each
// table's lock only to encode it and to mark it saved, so mutations are not
// blocked by fsync. Lock order: the save mutex, then one table lock.
package metadata
