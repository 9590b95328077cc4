package main

import (
	"strings"
	"testing"
)

// TestServeRefusesBadSettings checks that a typo in the environment or an
// impossible alert limit stops serve before it opens anything, with a
// message naming the setting.
func TestServeRefusesBadSettings(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"env int", map[string]string{"SWITCHBOARD_MAX_ATTEMPTS": "ten"}, nil,
			[]string{`SWITCHBOARD_MAX_ATTEMPTS="ten" is not an integer`}},
		{"env duration and bool together", map[string]string{"SWITCHBOARD_LEASE": "5", "SWITCHBOARD_ALLOW_EXEC": "maybe"}, nil,
			[]string{`SWITCHBOARD_LEASE="5" is not a duration`, `SWITCHBOARD_ALLOW_EXEC="maybe" is not true or false`}},
		{"env float", map[string]string{"SWITCHBOARD_ALERT_ERROR_RATE": "1%"}, nil,
			[]string{`SWITCHBOARD_ALERT_ERROR_RATE="1%" is not a number`}},
		{"error rate above one", nil, []string{"--alert-error-rate", "5"}, []string{"--alert-error-rate is a fraction"}},
		{"zero queue depth", nil, []string{"--alert-queue-depth", "0"}, []string{"--alert-queue-depth must be at least 1"}},
		{"negative window", nil, []string{"--alert-window", "-1m"}, []string{"--alert-window must be positive"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			_, err := runCLI(t, append([]string{"serve", "--data", dir, "--addr", "127.0.0.1:0"}, c.args...)...)
			if err == nil {
				t.Fatal("serve started; want a refusal")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
