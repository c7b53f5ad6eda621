// Package gantryv1 is the generated Go code of Gantry's gRPC API
// (messaging.proto, nameserver.proto, admin.proto, controller.proto). Do
// not edit the *.pb.go files: change the .proto files and run
// `go generate ./api/...`.
package gantryv1

//go:generate go run ../../internal/protogen messaging.proto nameserver.proto admin.proto controller.proto
