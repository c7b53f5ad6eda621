// Package archtest checks that imports point down the package layers and
// keep to the rules inside broker/ (docs/ARCHITECTURE.md).
package archtest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/gantrymq/gantry"

// allowed lists, for each layer, the layers it may import
// (docs/ARCHITECTURE.md, "Package map and import rules").
// A package's layer is its first path element below the module
// (internal/fsx is "internal"), or one of sublayers; "std" is the standard
// library, "ext" any other module.
var allowed = map[string][]string{
	"message":      {"std"},
	"internal":     {"std", "internal", "ext"},
	"remoting":     {"std", "message", "internal"},
	"commitlog":    {"std", "message", "internal", "ext"},
	"consumequeue": {"std", "internal", "ext"},
	"index":        {"std", "internal", "ext"},
	"auth":         {"std", "internal", "ext"},
	"replication":  {"std", "commitlog", "api", "auth", "internal", "ext"},
	"broker":       {"std", "commitlog", "consumequeue", "index", "replication", "message", "remoting", "api", "auth", "internal", "ext"},
	"nameserver":   {"std", "remoting", "api", "auth", "internal", "ext"},
	"client":       {"std", "api", "auth", "message", "internal", "ext"},
	"api":          {"std", "ext"},
	// the load generator of `gantry bench` and test/bench: a client program
	"internal/benchkit": {"std", "client", "internal", "ext"},
	"embedded":          {"*"}, // runs a nameserver and a broker in a user's process
	"cmd":               {"*"},
	"test":              {"*"},
}

// sublayers are the packages below a first path element that form a layer
// of their own.
var sublayers = []string{"internal/benchkit"}

// A rule forbids the packages From to import the packages To, but for the
// importers Except. A pattern names a package of the module by its path
// below it ("broker"), or the package and those below it ("broker/store/...");
// a pattern whose first element has a dot names another module's packages
// ("google.golang.org/grpc/...").
type rule struct {
	Name           string
	From, To       []string
	Except         []string // importers the rule lets through
	ExceptSelfTree bool     // a package of To may import another of To
}

// protocols are the packages that speak a wire protocol.
var protocols = []string{
	"remoting/...", "api/...", "broker/grpcapi/...", "broker/remotingapi/...", "broker/server/...",
	"google.golang.org/grpc/...", "google.golang.org/protobuf/...",
}

// rules are the directions inside the layers (docs/ARCHITECTURE.md).
var rules = []rule{
	{
		Name: "the store never imports a protocol",
		From: []string{"broker/store/...", "broker/metadata/...", "commitlog/...", "consumequeue/...", "index/..."},
		To:   protocols,
	},
	{
		Name: "a front end never imports the other",
		From: []string{"broker/grpcapi/..."}, To: []string{"broker/remotingapi/..."},
	},
	{
		Name: "a front end never imports the other",
		From: []string{"broker/remotingapi/..."}, To: []string{"broker/grpcapi/..."},
	},
	{
		Name: "a front end reaches the store through the broker only",
		From: []string{"broker/grpcapi/...", "broker/remotingapi/..."},
		To:   []string{"broker/store/...", "broker/metadata/...", "commitlog/...", "consumequeue/...", "index/..."},
	},
	{
		Name:   "only broker/server (and cmd, embedded, test) imports a front end",
		From:   []string{"..."},
		To:     []string{"broker/grpcapi/...", "broker/remotingapi/..."},
		Except: []string{"broker/server/...", "cmd/...", "embedded/...", "test/..."},
	},
	{
		Name:   "nothing outside test/ imports test/",
		From:   []string{"..."},
		To:     []string{"test/..."},
		Except: []string{"test/..."},
	},
	{
		Name:   "the load generator is cmd's and test's",
		From:   []string{"..."},
		To:     []string{"internal/benchkit/..."},
		Except: []string{"cmd/...", "test/..."},
	},
	{
		Name:   "nothing imports cmd/",
		From:   []string{"..."},
		To:     []string{"cmd/..."},
		Except: []string{"cmd/..."},
	},
	{
		Name:           "delivery and de-duplication are the broker's: imported by it only",
		From:           []string{"..."},
		To:             []string{"broker/delivery/...", "broker/dedup/..."},
		Except:         []string{"broker"},
		ExceptSelfTree: true,
	},
	{
		Name: "delivery, de-duplication and the broker's errors never import a front end",
		From: []string{"broker/delivery/...", "broker/dedup/...", "broker/brokererr/..."},
		To:   []string{"broker/grpcapi/...", "broker/remotingapi/...", "broker/server/..."},
	},
	{
		Name:   "limits (retention, backlog limits, TTL) are the broker's: imported by it only",
		From:   []string{"..."},
		To:     []string{"broker/limits/..."},
		Except: []string{"broker"},
	},
	{
		Name: "limits never import a front end",
		From: []string{"broker/limits/..."},
		To:   []string{"broker/grpcapi/...", "broker/remotingapi/...", "broker/server/..."},
	},
}

func layer(pkg string) string {
	if !strings.HasPrefix(pkg, module+"/") {
		if strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
			return "ext"
		}
		return "std"
	}
	rest := strings.TrimPrefix(pkg, module+"/")
	for _, sub := range sublayers {
		if rest == sub || strings.HasPrefix(rest, sub+"/") {
			return sub
		}
	}
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

// matches reports whether pkg (a full import path) is named by pattern.
func matches(pattern, pkg string) bool {
	if pattern == "..." {
		return strings.HasPrefix(pkg, module+"/")
	}
	full := pattern
	if first := strings.SplitN(pattern, "/", 2)[0]; !strings.Contains(first, ".") {
		full = module + "/" + pattern
	}
	if tree, ok := strings.CutSuffix(full, "/..."); ok {
		return pkg == tree || strings.HasPrefix(pkg, tree+"/")
	}
	return pkg == full
}

func matchesAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if matches(p, pkg) {
			return true
		}
	}
	return false
}

// forbids reports whether r forbids from to import to.
func (r rule) forbids(from, to string) bool {
	if !matchesAny(r.From, from) || !matchesAny(r.To, to) || matchesAny(r.Except, from) {
		return false
	}
	return !(r.ExceptSelfTree && matchesAny(r.To, from))
}

// violations checks the lines of `go list -f '{{.ImportPath}} {{join
// .Imports " "}}'` against the layer table and the rules, and returns one
// message per forbidden import.
func violations(lines string) (problems []string, checked int) {
	for line := range strings.Lines(lines) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if pkg == "" {
			continue
		}
		l := layer(pkg)
		if _, known := allowed[l]; !known {
			problems = append(problems, fmt.Sprintf("package %s is in no layer: add it to the table", pkg))
		}
		for _, imp := range strings.Fields(imports) {
			checked++
			if !permitted(pkg, imp) {
				problems = append(problems, fmt.Sprintf("%s (%s) must not import %s (%s)", pkg, l, imp, layer(imp)))
			}
			for _, r := range rules {
				if r.forbids(pkg, imp) {
					problems = append(problems, fmt.Sprintf("%s must not import %s: %s", pkg, imp, r.Name))
				}
			}
		}
	}
	return problems, checked
}

func TestImportDirections(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	require.NoError(t, err)
	problems, checked := violations(string(out))
	assert.Empty(t, problems)
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

// Each rule inside broker/ catches a planted violation, named by the rule,
// and lets the legal import beside it through.
func TestRulesCatchPlantedViolations(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	tests := []struct {
		from, to string
		rule     string // "" for a legal import
	}{
		{m("broker/store"), m("broker/grpcapi"), "the store never imports a protocol"},
		{m("broker/store"), m("remoting"), "the store never imports a protocol"},
		{m("broker/metadata"), m("api/gantry/v1"), "the store never imports a protocol"},
		{m("broker/store"), "google.golang.org/grpc", "the store never imports a protocol"},
		{m("commitlog"), m("broker/server"), "the store never imports a protocol"},
		{m("broker/store"), m("broker/metadata"), ""},
		{m("broker/grpcapi"), m("broker/remotingapi"), "a front end never imports the other"},
		{m("broker/remotingapi"), m("broker/grpcapi"), "a front end never imports the other"},
		{m("broker/grpcapi"), m("broker/store"), "a front end reaches the store through the broker only"},
		{m("broker/remotingapi"), m("broker/metadata"), "a front end reaches the store through the broker only"},
		{m("broker/grpcapi"), m("commitlog"), "a front end reaches the store through the broker only"},
		{m("broker/grpcapi"), m("broker"), ""},
		{m("broker"), m("broker/grpcapi"), "only broker/server (and cmd, embedded, test) imports a front end"},
		{m("nameserver"), m("broker/remotingapi"), "only broker/server (and cmd, embedded, test) imports a front end"},
		{m("broker/server"), m("broker/grpcapi"), ""},
		{m("embedded"), m("broker/remotingapi"), ""},
		{m("cmd/gantry"), m("test/benchkit"), "nothing outside test/ imports test/"},
		{m("embedded"), m("test/reliability"), "nothing outside test/ imports test/"},
		{m("cmd/gantry"), m("internal/benchkit"), ""},
		{m("test/bench"), m("internal/benchkit"), ""},
		{m("broker"), m("internal/benchkit"), "the load generator is cmd's and test's"},
		{m("internal/fsx"), m("internal/benchkit"), "must not import"},
		{m("internal/benchkit"), m("broker"), "must not import"},
		{m("test/reliability"), m("test/reliability/history"), ""},
		{m("broker/server"), m("cmd/gantry"), "nothing imports cmd/"},
		{m("broker/grpcapi"), m("broker/delivery"), "delivery and de-duplication are the broker's: imported by it only"},
		{m("broker/server"), m("broker/dedup"), "delivery and de-duplication are the broker's: imported by it only"},
		{m("broker"), m("broker/delivery"), ""},
		{m("broker/delivery"), m("broker/dedup"), ""},
		{m("broker/delivery"), m("broker/grpcapi"), "delivery, de-duplication and the broker's errors never import a front end"},
		{m("broker/dedup"), m("broker/server"), "delivery, de-duplication and the broker's errors never import a front end"},
		{m("broker/brokererr"), m("broker/remotingapi"), "delivery, de-duplication and the broker's errors never import a front end"},
		{m("broker/dedup"), m("broker/brokererr"), ""},
	}
	for _, tt := range tests {
		problems, checked := violations(tt.from + " fmt " + tt.to + "\n")
		assert.Equal(t, 2, checked)
		if tt.rule == "" {
			assert.Empty(t, problems, "%s -> %s", tt.from, tt.to)
			continue
		}
		if assert.NotEmpty(t, problems, "%s -> %s", tt.from, tt.to) {
			assert.Contains(t, strings.Join(problems, "\n"), tt.rule, "%s -> %s", tt.from, tt.to)
		}
	}
}

// A planted violation among real lines fails the check that runs on the
// module: the test is not vacuous.
func TestPlantedViolationAmongRealPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/broker/...").Output()
	require.NoError(t, err)
	clean, _ := violations(string(out))
	require.Empty(t, clean)
	planted := string(out) + module + "/broker/remotingapi " + module + "/broker/grpcapi\n"
	problems, _ := violations(planted)
	assert.Contains(t, problems, module+"/broker/remotingapi must not import "+module+"/broker/grpcapi: a front end never imports the other")
}

func TestPatterns(t *testing.T) {
	assert.True(t, matches("broker", module+"/broker"))
	assert.False(t, matches("broker", module+"/broker/store"))
	assert.True(t, matches("broker/store/...", module+"/broker/store"))
	assert.True(t, matches("broker/store/...", module+"/broker/store/x"))
	assert.False(t, matches("broker/store/...", module+"/broker/storex"))
	assert.True(t, matches("...", module+"/cmd/gantry"))
	assert.False(t, matches("...", "fmt"))
	assert.True(t, matches("google.golang.org/grpc/...", "google.golang.org/grpc/codes"))
	assert.False(t, matches("google.golang.org/grpc/...", "google.golang.org/grpcx"))
	assert.Equal(t, "internal/benchkit", layer(module+"/internal/benchkit"))
	assert.Equal(t, "internal", layer(module+"/internal/fsx"))
}
