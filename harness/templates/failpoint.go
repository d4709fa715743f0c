// Package failpoint is crashpoint's failpoint client for Go (docs/failpoints.md).
// Copy this file into a failpoint/ directory of your module and call
//
//	failpoint.At("after_claim", jobID, attempt) // returns "continue"
//	failpoint.JobEnd(jobID, "done", attempt)    // once the end is durable
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
	return send(map[string]any{"point": point, "job": job, "attempt": attempt})
}

// JobEnd tells the harness job has ended with outcome (done, needs_review or
// dead_lettered), so it need not poll the status command for it.
func JobEnd(job, outcome string, attempt int) {
	send(map[string]any{"point": "job_end", "job": job, "attempt": attempt, "outcome": outcome})
}

func send(msg map[string]any) string {
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
	msg["pid"] = os.Getpid()
	if worker != "" {
		msg["worker"] = worker
	}
	// The caller's file and line: a report can point at the boundary in the worker's source.
	// Two frames up: send, then At or JobEnd, then the worker's own call.
	if _, file, lineNo, ok := runtime.Caller(2); ok {
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
