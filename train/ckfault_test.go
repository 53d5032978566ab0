package train

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/ssdgnn/ssdgnn/storage"
)

// ckSink keeps the test's read of the mapping from being optimised away.
var ckSink byte

// TestCheckpointMappingTruncated: a checkpoint truncated by another
// program while its mapping is in use (infer, a resume) faults on the
// next read past the new end: a *storage.ChangedError naming the file,
// as for the dataset's arrays, not a SIGBUS crash (its mapping was not
// tracked, so the fault panicked on).
func TestCheckpointMappingTruncated(t *testing.T) {
	meta, err := json.Marshal(checkpointMeta{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), CheckpointFile)
	parm := make([]byte, 5*4096)
	if err := os.WriteFile(p, encodeCheckpoint([]section{{secMeta, meta}, {secParm, parm}, {secAdam, make([]byte, 8)}, {secEnd, nil}}), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := readCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.close()
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		var err error
		defer func() { done <- err }()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer storage.CatchFault(&err)
		ckSink = ck.parm[len(ck.parm)-1]
	}()
	err = <-done
	var ce *storage.ChangedError
	if !errors.As(err, &ce) || ce.Path != p {
		t.Fatalf("read past a truncated checkpoint: %v, want a *storage.ChangedError naming %s", err, p)
	}
}
