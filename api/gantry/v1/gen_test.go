package gantryv1_test

import (
	"os/exec"
	"testing"
)

// The committed generated code is what the .proto files and the pinned
// generators produce.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the code generators")
	}
	out, err := exec.Command("go", "run", "../../internal/protogen", "-check", "messaging.proto", "nameserver.proto", "admin.proto", "controller.proto").CombinedOutput()
	if err != nil {
		t.Fatalf("generated code is stale or cannot be generated: %v\n%s", err, out)
	}
}
