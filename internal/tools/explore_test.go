// explore_test.go benchmarks the exploring tools on a large tree.

package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"acpbridge/internal/clip"
)

// bigTree makes a tree of dirs × files small text files, a tenth of them
// ignored by its .gitignore.
func bigTree(b *testing.B, dirs, files int) string {
	dir := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.skip\n"), 0o644))
	line := strings.Repeat("lorem ipsum dolor sit amet ", 6) + "\n"
	for d := range dirs {
		sub := filepath.Join(dir, fmt.Sprintf("d%04d", d))
		require.NoError(b, os.MkdirAll(sub, 0o755))
		for f := range files {
			name := fmt.Sprintf("f%03d.txt", f)
			if f%10 == 0 {
				name = fmt.Sprintf("f%03d.skip", f)
			}
			content := line + line
			if d == dirs-1 && f == files-1 {
				content += "the needle\n"
			}
			require.NoError(b, os.WriteFile(filepath.Join(sub, name), []byte(content), 0o644))
		}
	}
	return dir
}

// BenchmarkExplore_search100k searches 100,000 files (1,000 directories of
// 100) for a line in the last one, and finds every .txt file; then a
// search cancelled 20 ms in. It reports the time a call and the heap it
// allocated, and the time from cancel to return.
//
//	go test -run '^$' -bench Explore -benchtime 3x .
func BenchmarkExplore_search100k(b *testing.B) {
	dir := bigTree(b, 1000, 100)
	s := Open([]string{dir})
	defer s.Close()
	re := regexp.MustCompile("needle")
	b.Run("search_text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := s.searchText(context.Background(), dir, re, "")
			if !strings.Contains(o.Result, "f099.txt:3:the needle") {
				b.Fatalf("not found: %s", o.Result)
			}
		}
		b.ReportMetric(float64(peakRSSKiB())/1024, "MiB-peak-RSS")
	})
	b.Run("find_files", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := s.findFiles(context.Background(), dir, "**/*.txt")
			if !strings.Contains(o.Result, "stopped at 1000 files") {
				b.Fatalf("not capped: %s", clip.Marked(o.Result, 200))
			}
		}
	})
	b.Run("cancelled", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan time.Time)
			go func() {
				s.searchText(ctx, dir, re, "")
				done <- time.Now()
			}()
			time.Sleep(20 * time.Millisecond) // a benchmark's cancel point, not synchronisation
			at := time.Now()
			cancel()
			total += (<-done).Sub(at)
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-to-stop")
	})
}

// peakRSSKiB is this process's peak resident memory.
func peakRSSKiB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// Verify that a search cancelled while its walk is still queueing files
// finishes: a file that could not be queued after the cancel is not waited
// for.
func TestTextSearch_cancelledWhileQueueing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hay\n"), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		ts := newTextSearch(ctx, root, regexp.MustCompile("needle"))
		in := &openDir{root: root}
		in.refs.Store(1 << 20) // never closed here
		for range 10 {
			ts.queue(in, "a.txt", "a.txt")
		}
		cancel()
		for range 300 { // past the queue's buffer: some of these find it cancelled
			ts.queue(in, "a.txt", "a.txt")
		}
		finished := make(chan struct{})
		go func() { ts.finish(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second): // a hang, not a timing
			t.Fatal("a search cancelled while queueing never finished")
		}
	}
}
