package remoting_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// golden is a captured frame (testdata/frame_*.bin) and its description
// (the .json beside it), copied from the shared RocketMQ test vectors.
type golden struct {
	Name          string
	Bin           []byte
	Code          int16  `json:"code"`
	FrameLength   int64  `json:"frameLength"`
	SerializeType uint8  `json:"serializeType"`
	HeaderLength  int    `json:"headerLength"`
	BodyLength    int    `json:"bodyLength"`
	HeaderText    string `json:"headerText"`
	BodyText      *string
	BodyHex       *string
	Header        struct {
		Code      int16             `json:"code"`
		Language  string            `json:"language"`
		Version   int32             `json:"version"`
		Opaque    int32             `json:"opaque"`
		Flag      int32             `json:"flag"`
		Remark    *string           `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	} `json:"header"`
}

func loadGolden(t testing.TB, name string) golden {
	t.Helper()
	var g golden
	meta, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(meta, &g))
	g.Name = name
	g.Bin, err = os.ReadFile(filepath.Join("testdata", name+".bin"))
	require.NoError(t, err)
	return g
}

// goldenNames lists the captured frames whose name ends with suffix
// ("_request" or "_response").
func goldenNames(t testing.TB, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "frame_*"+suffix+".bin"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".bin"))
	}
	return names
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	return lis
}
