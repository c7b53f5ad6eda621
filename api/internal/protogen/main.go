// Command protogen generates the Go code of Gantry's .proto files without
// protoc: it compiles them with protocompile and feeds the result to the
// protoc-gen-go and protoc-gen-go-grpc plugins pinned as tool dependencies
// in go.mod (`go tool protoc-gen-go`), so that every machine generates the
// same bytes. Run it through `go generate ./api/...`.
//
//	protogen [-check] file.proto...
//
// Files are read from, and written to, the current directory. With -check
// nothing is written: it exits 1 naming every generated file that differs
// from the committed one.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// plugins run in this order; each is a `go tool` of the main module.
var plugins = []string{"protoc-gen-go", "protoc-gen-go-grpc"}

func main() {
	check := flag.Bool("check", false, "compare with the files on disk instead of writing them")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: protogen [-check] file.proto...")
		os.Exit(2)
	}
	out, err := generate(context.Background(), flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	slices.Sort(names)
	stale := 0
	for _, name := range names {
		if *check {
			old, err := os.ReadFile(name)
			if err != nil || !bytes.Equal(old, out[name]) {
				fmt.Fprintf(os.Stderr, "protogen: %s is stale: run go generate ./api/...\n", name)
				stale++
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "protogen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(name, out[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "protogen:", err)
			os.Exit(1)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}

// generate compiles files and returns the plugins' output by file name.
func generate(ctx context.Context, files []string) (map[string][]byte, error) {
	comp := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"."}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := comp.Compile(ctx, files...)
	if err != nil {
		return nil, err
	}
	var protos []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) { // dependencies first, as protoc orders them
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		protos = append(protos, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	req, err := proto.Marshal(&pluginpb.CodeGeneratorRequest{
		FileToGenerate: files,
		Parameter:      proto.String("paths=source_relative"),
		ProtoFile:      protos,
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, plugin := range plugins {
		cmd := exec.CommandContext(ctx, "go", "tool", plugin)
		cmd.Stdin = bytes.NewReader(req)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go tool %s: %w", plugin, err)
		}
		var resp pluginpb.CodeGeneratorResponse
		if err := proto.Unmarshal(b, &resp); err != nil {
			return nil, fmt.Errorf("%s: bad response: %w", plugin, err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: %s", plugin, resp.GetError())
		}
		for _, f := range resp.File {
			out[f.GetName()] = []byte(f.GetContent())
		}
	}
	return out, nil
}
