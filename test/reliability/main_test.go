package reliability

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if code, ok := RunChild(); ok {
		os.Exit(code)
	}
	code := m.Run()
	fmt.Println(Summary())
	os.Exit(code)
}
