package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
)

func writeSkill(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// --skills-dir registers its skills in the shared registry at start; an
// exec skill there needs --allow-exec; a directory with problems stops the
// start with every problem and its line.
func TestSkillsDirAtStart(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "greet.md", "---\nid: greet\nversion: 1.0.0\n---\nSay hello.\n")
	writeSkill(t, dir, "stamp.md", "---\nid: stamp\nrun: {exec: [date]}\n---\nPrint the date.\n")
	h := apptest.Start(t, "", func(c *app.Config) { c.Pipelines.SkillsDir = dir; c.Pipelines.AllowExec = true })
	recs, err := h.Admin.Skills(context.Background())
	if err != nil || len(recs) != 2 || recs[0].Skill.ID != "greet" || recs[1].Skill.ID != "stamp" || recs[0].Owner != "" {
		t.Fatalf("shared registry after start: %+v %v", recs, err)
	}
	_, agent := h.NewAgent("Reader")
	if rec, err := agent.Skill(context.Background(), "greet"); err != nil || rec.Skill.Version != "1.0.0" {
		t.Fatalf("an agent reads the shared skill: %+v %v", rec, err)
	}

	for _, tc := range []struct {
		name  string
		files map[string]string
		allow bool
		says  []string
	}{
		{"exec without --allow-exec", map[string]string{"stamp.md": "---\nid: stamp\nrun: {exec: [date]}\n---\n"}, false, []string{"exec_not_allowed", "stamp"}},
		{"problems", map[string]string{"a.md": "---\nid: a\nrun: {agent: [x]}\n---\n", "b.md": "---\nid: b\nretires: 2\n---\n"}, true,
			[]string{"--skills-dir", "a.md:run.agent", "line 3", "b.md:retires"}},
	} {
		bad := t.TempDir()
		for n, c := range tc.files {
			writeSkill(t, bad, n, c)
		}
		a, err := app.New(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(),
			Pipelines: app.PipelineConfig{SkillsDir: bad, AllowExec: tc.allow}})
		if err == nil {
			a.Close()
			t.Fatalf("%s: the hub started", tc.name)
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error does not mention %q:\n%v", tc.name, s, err)
			}
		}
	}
}
