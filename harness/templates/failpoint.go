// Package failpoint is crashpoint's failpoint client for Go (docs/failpoints.md).
// Copy this file into a failpoint/ directory of your module and call
//
//	failpoint.At("after_claim", jobID, attempt) // returns "continue"
//
// Unset CRASHPOINT_FAILPOINTS: returns at once. If the harness goes away: failpoints off.
package failpoint

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

var (
	path   = os.Getenv("CRASHPOINT_FAILPOINTS")
	worker = os.Getenv("CRASHPOINT_WORKER_ID")
	off    atomic.Bool
	mu     sync.Mutex // the protocol has one request in flight per connection
	conn   net.Conn
	reader *bufio.Reader
)

// At reports reaching point for job's attempt and blocks until the harness answers.
func At(point, job string, attempt int) string {
	if path == "" || off.Load() {
		return "continue"
	}
	mu.Lock()
	defer mu.Unlock()
	if conn == nil {
		c, err := net.Dial("unix", path)
		if err != nil {
			off.Store(true)
			return "continue"
		}
		conn, reader = c, bufio.NewReader(c)
	}
	msg := map[string]any{"point": point, "job": job, "attempt": attempt, "pid": os.Getpid()}
	if worker != "" {
		msg["worker"] = worker
	}
	// The caller's file and line: a report can point at the boundary in the worker's source.
	if _, file, lineNo, ok := runtime.Caller(1); ok {
		msg["file"], msg["line"] = filepath.Clean(file), lineNo
	}
	line, _ := json.Marshal(msg)
	if _, err := conn.Write(append(line, '\n')); err == nil {
		if text, err := reader.ReadBytes('\n'); err == nil {
			reply := struct{ Action string }{}
			if json.Unmarshal(text, &reply) == nil && reply.Action != "" {
				return reply.Action
			}
			return "continue"
		}
	}
	conn.Close()
	off.Store(true)
	return "continue"
}
