package grpcapi

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
)

// Authorization costs nothing with authentication off, and no allocation
// for an allowed call with it on.
func TestAllowAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what escapes")
	}
	u, err := auth.NewUsers(auth.File{Users: []auth.User{{AccessKey: "producer1", SecretKey: "producer-secret",
		Rules: []auth.Rule{{Resource: "Topic:T", Actions: []string{"Pub"}}}}}})
	require.NoError(t, err)
	p, _ := u.Lookup("producer1")
	ctx := auth.NewContext(context.Background(), p)
	send := gantryv1.Messaging_Send_FullMethodName
	off := guard{}
	on := guard{auth.NewGuard(auth.GuardConfig{Users: func() *auth.Users { return u }})}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = off.allow(ctx, send, auth.Topic("T")) }))
	require.NoError(t, on.allow(ctx, send, auth.Topic("T")))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = on.allow(ctx, send, auth.Topic("T")) }))

	err = on.allow(ctx, send, auth.Topic("U"))
	assert.Equal(t, codes.PermissionDenied, status.Code(err))
	err = on.allow(ctx, "/gantry.v1.Messaging/Unknown", auth.Topic("T"))
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "a method without a class is refused")
	assert.Contains(t, status.Convert(err).Message(), "no operation class")
}

// docs/SECURITY.md lists every method with its class, as methodClasses
// has it.
func TestSecurityDocListsEveryMethod(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "SECURITY.md"))
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `((?:Messaging|Admin)/\\w+)` \\| (\\w+) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		documented["/gantry.v1."+m[1]] = m[2]
	}
	want := map[string]string{}
	for method, c := range methodClasses {
		want[method] = c.String()
	}
	assert.Equal(t, want, documented, "docs/SECURITY.md, \"gRPC methods\"")
}
