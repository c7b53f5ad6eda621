// Package reliability is Gantry's reliability suite (docs/RELIABILITY.md):
// single-node fault families that each end in a checker verdict
// (package checker) computed from recorded histories (package history).
//
// The tests start every component as a child process of the test binary
// (re-executed with GANTRY_RELIABILITY_CHILD set: see RunChild), so that
// each can be killed with SIGKILL, stopped with SIGSTOP, or restarted on
// the same data directory:
//
//	nameserver   nameserver.Server on a loopback port
//	broker       server.Start on fixed loopback ports (kept across restarts)
//	producer     workload.RunProducer, writing its history
//	consumer     workload.RunConsumer, writing its history
//	controller   a replication controller member (controller.New and its service)
//	member       a controller-mode broker (server.StartMember)
//
// Group (group.go) runs three controllers and a group of three
// controller-mode brokers for the failover tests (failover_test.go).
//
// Env ties one test's processes, histories and verdict together. The
// short tier (the default) keeps every loop small enough for CI; the long
// tier (GANTRY_RELIABILITY=long) runs the counts RELIABILITY.md asks for.
// GANTRY_RELIABILITY_SEED replays a run's random choices;
// GANTRY_RELIABILITY_DIR keeps the data and histories of every run there.
package reliability
