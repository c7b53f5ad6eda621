package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// storageFamilies are the in-process families of RELIABILITY.md §4 that
// live beside the code they test (crash-state enumeration on fsx.MemFS,
// torn tails, corruption, derived data, metadata backups, ENOSPC and EIO
// through fsx.WithFaults, the offline verifier). They run in every
// `go test ./...`; the long tier runs them again from here with the long
// counts, one verdict line per family.
var storageFamilies = []struct {
	name  string
	runs  [][2]string // package, -run pattern
	env   []string    // long-tier counts
	short string      // where the short tier runs them
}{
	{name: "crash-states-commitlog", runs: [][2]string{{"./commitlog", "^TestCrashStates$"}},
		env: []string{"GANTRY_CRASH_STATES=10000"}},
	{name: "crash-states-store", runs: [][2]string{{"./broker/store", "^TestCrashStates$"}},
		env: []string{"GANTRY_STORE_CRASH_STATES=2000"}},
	{name: "torn-tail-and-corruption", runs: [][2]string{
		{"./commitlog", "^TestRecover"},
		{"./consumequeue", "^TestRecover"},
		{"./index", "^(TestCrashKeepsFlushed|TestOpenDropsImpossibleHeader|TestOpenRebuildsStaleHeader)$"},
	}},
	{name: "disk-faults-fsx", runs: [][2]string{
		{"./commitlog", "^(TestENOSPCAtFallocate|TestEIOAtFlushIsFinal|TestAsyncFlushEventuallyDurable)$"},
	}},
	{name: "derived-data", runs: [][2]string{
		{"./broker/store", "^(TestRebuildDeletedDerivedData|TestCrashMidDispatch|TestDamagedQueueEntriesRebuilt|TestRecoveryReportDispatchHookAndSyncFlush)$"},
	}},
	{name: "metadata-damage", runs: [][2]string{
		{"./broker/store", "^TestMetadataFallsBackToBackup$"},
		{"./broker/metadata", "^(TestOpenFallsBackToBackup|TestOpenRefusesWhenBothDamaged|TestOpenReportsEveryDamagedFile|TestCrashDuringSave|TestSaveWriteFaults)$"},
	}},
	{name: "offline-verify", runs: [][2]string{
		{"./broker/verify", "^(TestDamage|TestGarbageNeverPanics|TestVerifyChangesNothing)$"},
	}},
}

// TestStorageFamilies runs the storage families' own tests (long tier
// only: the short tier runs them with their packages) and reports a
// verdict per family: PASS when every test it names passed.
func TestStorageFamilies(t *testing.T) {
	if !Long() {
		t.Skipf("short tier: these run with their packages (go test ./commitlog ./consumequeue ./index ./broker/store "+
			"./broker/metadata ./broker/verify); %s=long runs them here with the long counts", TierEnv)
	}
	goTool, root := goCommand(t), moduleRoot(t)
	for _, f := range storageFamilies {
		t.Run(f.name, func(t *testing.T) {
			start := time.Now()
			passed, failed := 0, 0
			var problems, notes []string
			for _, r := range f.runs {
				args := []string{"test", "-count=1", "-v", "-timeout=60m", "-run", r[1], r[0]}
				if raceEnabled {
					args = append(args[:1], append([]string{"-race"}, args[1:]...)...)
				}
				cmd := exec.Command(goTool, args...)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), f.env...)
				out, err := cmd.CombinedOutput()
				p, fl := countTopLevel(out)
				passed, failed = passed+p, failed+fl
				notes = append(notes, stateCounts(out)...)
				if err != nil || p == 0 {
					problems = append(problems, fmt.Sprintf("go test %s: %v\n%s", strings.Join(args[1:], " "), err, lastLines(out, 30)))
				}
			}
			line := strings.TrimSpace(fmt.Sprintf("PASS storage/%s tests=%d failed=%d took=%s %s %s", f.name, passed, failed,
				time.Since(start).Round(time.Second), strings.Join(f.env, " "), strings.Join(notes, " ")))
			ok := len(problems) == 0 && failed == 0
			if !ok {
				line = "FAIL" + strings.TrimPrefix(line, "PASS")
			}
			fmt.Fprintln(os.Stdout, line)
			t.Log(line)
			countVerdict(ok)
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// countTopLevel counts the top-level "--- PASS" and "--- FAIL" lines of
// go test -v output.
func countTopLevel(out []byte) (passed, failed int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "--- PASS: "):
			passed++
		case strings.HasPrefix(line, "--- FAIL: "):
			failed++
		}
	}
	return passed, failed
}

// stateRE matches commitlog.TestCrashStates's log line.
var stateRE = regexp.MustCompile(`(\S+): (\d+) crash states checked, (\d+) records appended`)

// stateCounts returns "<mode>=<states>states/<records>records" for each
// crash-state log line of the output.
func stateCounts(out []byte) []string {
	var notes []string
	for _, m := range stateRE.FindAllSubmatch(out, -1) {
		notes = append(notes, fmt.Sprintf("%s=%sstates/%srecords", m[1], m[2], m[3]))
	}
	return notes
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// goCommand finds the go tool: on PATH, else in GOROOT.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no go tool to run the storage families: %v", err)
	}
	return p
}

// moduleRoot is the directory of the main module's go.mod above the
// working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
