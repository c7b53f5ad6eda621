//go:build race

package grpcapi

const raceEnabled = true
