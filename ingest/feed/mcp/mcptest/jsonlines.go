package mcptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// JSONLinesFile appends values to a file as JSON lines: how the mcpserver
// command reports its effects and calls to a test in another process.
// Each line is one write to a file opened for appending, so a reader never
// sees half a line of a value written before the call was answered.
type JSONLinesFile struct {
	mu sync.Mutex
	f  *os.File
}

// OpenJSONLines opens path for appending, creating it if needed.
func OpenJSONLines(path string) (*JSONLinesFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mcptest: %w", err)
	}
	return &JSONLinesFile{f: f}, nil
}

// Append writes v as one line. A value that cannot be written is dropped:
// the reader's count then comes up short, which a test notices.
func (l *JSONLinesFile) Append(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(append(b, '\n'))
}

// Close closes the file.
func (l *JSONLinesFile) Close() error {
	return l.f.Close()
}

// ReadEffects reads the effects an mcpserver -effects FILE wrote; none
// when the file does not exist.
func ReadEffects(path string) ([]Effect, error) {
	return readJSONLines[Effect](path)
}

// ReadCalls reads the tools/call requests an mcpserver -calls FILE wrote;
// none when the file does not exist.
func ReadCalls(path string) ([]ToolCall, error) {
	return readJSONLines[ToolCall](path)
}

func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcptest: %w", err)
	}
	defer f.Close()
	var out []T
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var v T
		if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
			return out, fmt.Errorf("mcptest: %s: %w", path, err)
		}
		out = append(out, v)
	}
	if err := lines.Err(); err != nil {
		return out, fmt.Errorf("mcptest: %s: %w", path, err)
	}
	return out, nil
}
