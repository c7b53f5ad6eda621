// Package archtest checks that imports point down the package layers of
// STYLE.md §1.
package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/gantrymq/gantry"

// allowed lists, for each layer, the layers it may import (STYLE.md §1).
// A package's layer is its first path element below the module
// (internal/fsx is "internal"); "std" is the standard library, "ext" any
// other module.
var allowed = map[string][]string{
	"message":      {"std"},
	"internal":     {"std", "internal", "ext"},
	"remoting":     {"std", "message", "internal"},
	"commitlog":    {"std", "message", "internal", "ext"},
	"consumequeue": {"std", "internal", "ext"},
	"index":        {"std", "internal", "ext"},
	"replication":  {"std", "commitlog", "api", "internal", "ext"},
	"broker":       {"std", "commitlog", "consumequeue", "index", "replication", "message", "remoting", "api", "internal", "ext"},
	"nameserver":   {"std", "remoting", "api", "internal", "ext"},
	"client":       {"std", "api", "message", "internal", "ext"},
	"api":          {"std", "ext"},
	"embedded":     {"*"}, // runs a nameserver and a broker in a user's process
	"cmd":          {"*"},
	"test":         {"*"},
}

func layer(pkg string) string {
	if !strings.HasPrefix(pkg, module+"/") {
		if strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
			return "ext"
		}
		return "std"
	}
	rest := strings.TrimPrefix(pkg, module+"/")
	return strings.SplitN(rest, "/", 2)[0]
}

func permitted(from, to string) bool {
	lf, lt := layer(from), layer(to)
	if lf == lt && lf != "internal" {
		return true // inside one component (broker/store may import broker/...)
	}
	for _, a := range allowed[lf] {
		if a == "*" || a == lt {
			return true
		}
	}
	return false
}

func TestImportDirections(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	require.NoError(t, err)
	checked := 0
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		l := layer(pkg)
		_, known := allowed[l]
		assert.True(t, known, "package %s is in no layer of STYLE.md §1: add it to the table", pkg)
		for _, imp := range strings.Fields(imports) {
			assert.True(t, permitted(pkg, imp), "%s (%s) must not import %s (%s)", pkg, l, imp, layer(imp))
			checked++
		}
	}
	assert.Positive(t, checked)
}

func TestPermittedTable(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{module + "/commitlog", module + "/message", true},
		{module + "/commitlog", module + "/internal/fsx", true},
		{module + "/message", module + "/internal/fsx", false},
		{module + "/message", "fmt", true},
		{module + "/message", "github.com/stretchr/testify/require", false},
		{module + "/consumequeue", module + "/commitlog", false},
		{module + "/client", module + "/broker", false},
		{module + "/internal/fsx", module + "/commitlog", false},
		{module + "/cmd/gantry", module + "/broker", true},
		{module + "/broker/store", module + "/broker", true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, permitted(tt.from, tt.to), "%s -> %s", tt.from, tt.to)
	}
}
