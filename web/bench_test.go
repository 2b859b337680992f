package web

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSSEUnderLoad sends commands through the API while event-stream
// clients follow the journal, one of them never reading, and compares the
// commands' latency with and without the clients in the same run. Every
// client that reads must get every event.
func BenchmarkSSEUnderLoad(b *testing.B) {
	for _, clients := range []int{0, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := newSite(b, siteOptions{})
			start := s.eng.LastSeq()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type follower struct {
				last, count atomic.Uint64
			}
			fs := make([]*follower, clients)
			var wg sync.WaitGroup
			open := func(read bool, f *follower) {
				req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/api/v1/events/stream", nil)
				req.Header.Set("Authorization", "Bearer tok-viewer")
				req.Header.Set("Last-Event-ID", strconv.FormatUint(start, 10))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				wg.Go(func() {
					defer resp.Body.Close()
					if !read {
						<-ctx.Done() // a client that never reads
						return
					}
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
							id, _ := strconv.ParseUint(v, 10, 64)
							f.last.Store(id)
							f.count.Add(1)
						}
					}
				})
			}
			for i := range fs {
				fs[i] = &follower{}
				open(true, fs[i])
			}
			if clients > 0 {
				open(false, nil)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				s.expect("POST", "/api/v1/commands", "operator", `{"device":"tank-1","capability":"level","id":"r-`+strconv.Itoa(i)+`"}`, 200, "completed")
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			end := s.eng.LastSeq()
			deadline := time.Now().Add(60 * time.Second)
			for _, f := range fs {
				for f.last.Load() < end {
					if time.Now().After(deadline) {
						b.Fatalf("a client got to %d of %d", f.last.Load(), end)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(end-start)*float64(clients)/b.Elapsed().Seconds(), "events-delivered/s")
			cancel()
			s.srv.CloseClientConnections()
			wg.Wait()
			// Every client got every event from where it started to where it
			// stopped, none twice: an event written after end (a reading's
			// record lags by up to the async window) may be among them.
			for _, f := range fs {
				if got, want := f.count.Load(), f.last.Load()-start; got != want {
					b.Fatalf("a client got %d events up to seq %d, want %d", got, f.last.Load(), want)
				}
			}
		})
	}
}
