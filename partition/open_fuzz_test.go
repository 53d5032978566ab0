package partition

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/ssdgnn/ssdgnn/internal/npy"
)

// FuzzOpen sets one element of one file of a small partitioning
// (optionally fixing its checksum, as a buggy writer would) or xors one
// byte anywhere: Open either fails or returns a partitioning whose every
// view is in bounds and holds valid ids.
func FuzzOpen(f *testing.F) {
	files := []string{FilePart, FileCross, FileMembersOffsets, FileMembers, FileTrainOffsets, FileTrainMembers, FileAdjIndptr, FileAdjIndices, ManifestName, FileStats}
	f.Add(uint8(2), false, uint16(3), int64(-1), false)  // members_offsets[3] = -1
	f.Add(uint8(5), false, uint16(0), int64(1e9), false) // train_members[0] = 1e9
	f.Add(uint8(6), false, uint16(7), int64(1e12), true) // adj_indptr[7] = 1e12
	f.Add(uint8(3), false, uint16(0), int64(5), true)
	f.Add(uint8(8), true, uint16(50), int64(3), false)
	g, _ := planted(60, 4, 6, 0.8, 0.3, 1)
	src := f.TempDir()
	d := g.write(f, src)
	if _, err := Run(d, &Options{Parts: 4, FirstLevel: 2}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, xorByte bool, pos uint16, val int64, fix bool) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		pdir := Dir(dir, "fennel")
		file := files[int(which)%len(files)]
		path := filepath.Join(pdir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, herr := npy.ParseHeader(b)
		switch {
		case xorByte || herr != nil:
			if len(b) > 0 {
				b[int(pos)%len(b)] ^= byte(val) | 1
			}
		case h.Len() > 0:
			size := int64(h.DType.Size())
			at := h.DataOffset + (int64(pos)%h.Len())*size
			for i := range size {
				b[at+i] = byte(val >> (8 * i))
			}
		}
		os.WriteFile(path, b, 0o644)
		if fix && herr == nil {
			mpath := filepath.Join(pdir, ManifestName)
			var m Manifest
			mb, _ := os.ReadFile(mpath)
			if json.Unmarshal(mb, &m) == nil {
				if e := m.File(file); e != nil {
					e.Checksum = fmt.Sprintf("xxhash64:%016x", xxhash.Sum64(b[h.DataOffset:]))
				}
				mb, _ = json.Marshal(&m)
				os.WriteFile(mpath, mb, 0o644)
			}
		}
		p, err := Open(dir, "fennel")
		if err != nil {
			return
		}
		defer p.Close()
		n := p.Manifest().NumNodes
		seen := make([]bool, n)
		for q := range p.K() {
			for _, v := range p.TrainMembers(q) {
				if v < 0 || v >= n {
					t.Fatalf("Open accepted training member %d", v)
				}
			}
			a := p.AdjacencyOf(q)
			for i, v := range a.Nodes {
				if seen[v] {
					t.Fatalf("Open accepted node %d twice in members", v)
				}
				seen[v] = true
				for _, u := range a.AppendNeighbors(i, nil) {
					if u < 0 || u >= n {
						t.Fatalf("Open accepted neighbour %d", u)
					}
				}
			}
		}
	})
}
