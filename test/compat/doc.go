// Package compat is Gantry's compatibility suite for the official Apache
// RocketMQ Go client (github.com/apache/rocketmq-client-go/v2): each test
// starts an embedded nameserver and broker in the test process, drives them
// with the official client over the RocketMQ remoting protocol, unmodified,
// and checks what it did with Gantry's own client and admin (gRPC).
//
// It is a module of its own so that the main module does not depend on the
// official client. Run it from this directory:
//
//	go test -race -count=1 ./...
//
// The official client has data races of its own; under -race, TestMain
// re-runs the test binary with GORACE naming race.supp, which suppresses
// reports with a frame in the official client (races among Gantry's own
// goroutines are still reported).
//
// GANTRY_COMPAT_LOG=debug (or info, warn, error) writes the embedded
// cluster's log, every remoting request included, to the test log. The
// throughput comparison of the official client with Gantry's runs only
// when asked for, preferably without -race:
//
//	GANTRY_COMPAT_BENCH=1 go test -run=TestSendThroughput -count=1 -v ./...
package compat
