package blackboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// namePattern is what the bridge accepts as a file or folder name taken
// from the hub (agent and message ids): the protocol's id characters, so
// no id can climb out of its folder.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

func validName(s string) bool {
	return len(s) > 0 && len(s) <= 200 && namePattern.MatchString(s) && !strings.Contains(s, "..")
}

// writeAtomic writes data to path so that readers see either nothing or
// the whole file: a temporary file starting with "." in the same folder,
// synced, then renamed over path.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		// CreateTemp makes 0600 files; agents reading the blackboard need
		// the usual permissions (the umask still applies to the folder).
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	syncDir(dir)
	return nil
}

// writeJSON writes v indented, atomically.
func writeJSON(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeAtomic(path, buf.Bytes())
}

// moveFile renames src to dst and makes the move durable.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	syncDir(filepath.Dir(dst))
	if filepath.Dir(src) != filepath.Dir(dst) {
		syncDir(filepath.Dir(src))
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// freeName returns dir/stem+ext, or a variant with a timestamp when that
// name (or its companion with companionExt) is taken, so sent/ and
// rejected/ never overwrite an earlier file.
func freeName(dir, stem, ext, companionExt string, now time.Time) (string, string) {
	name := stem
	for i := 0; ; i++ {
		if !exists(filepath.Join(dir, name+ext)) && !exists(filepath.Join(dir, name+companionExt)) {
			return filepath.Join(dir, name+ext), filepath.Join(dir, name+companionExt)
		}
		name = fmt.Sprintf("%s.%s", stem, now.UTC().Format("20060102T150405.000000000Z"))
		if i > 0 {
			name = fmt.Sprintf("%s.%d", name, i)
		}
	}
}

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
