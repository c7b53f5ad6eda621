package dedup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestConfigValidate(t *testing.T) {
	now := func() time.Time { return time.Time{} }
	for name, c := range map[string]Config{
		"no window": {Now: now},
		"no clock":  {Window: time.Minute},
		"no store":  {Window: time.Minute, Now: now},
	} {
		assert.Error(t, c.Validate(), name)
	}
}
