package testutil

import (
	"os"
	"testing"
	"time"
)

func TestEnvInt(t *testing.T) {
	t.Setenv("GANTRY_TESTUTIL_N", "")
	if got := EnvInt(t, "GANTRY_TESTUTIL_N", 7); got != 7 {
		t.Fatalf("unset: got %d, want 7", got)
	}
	t.Setenv("GANTRY_TESTUTIL_N", "42")
	if got := EnvInt(t, "GANTRY_TESTUTIL_N", 7); got != 42 {
		t.Fatalf("set: got %d, want 42", got)
	}
}

func TestBenchDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv("GANTRY_BENCH_DIR", root)
	var dir string
	t.Run("inner", func(t *testing.T) {
		dir = BenchDir(t)
		if _, err := os.Stat(dir); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s not removed after the test: %v", dir, err)
	}
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Advance, Now = %v, want %v", c.Now(), want)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Fatalf("after Set, Now = %v, want %v", c.Now(), start)
	}
}
