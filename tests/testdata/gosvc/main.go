// Command gosvc is a small Go service for profilink's pprof tests: a busy loop of labelled
// goroutines (pprof.Do labels, small functions the compiler inlines), served by net/http/pprof
// at -listen, or recorded once as a CPU profile (-cpuprofile) and a heap profile (-heapprofile).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

var sink uint64
var keep [][]byte

// mix is small enough to be inlined into its callers.
func mix(x uint64) uint64 { return x*6364136223846793005 + 1442695040888963407 }

// step is inlined too, and inlines mix: a location with several inline levels.
func step(x uint64) uint64 { return mix(x) ^ (x >> 17) }

//go:noinline
func hashLoop(n int) uint64 {
	x := uint64(n)
	for i := 0; i < n; i++ {
		x = step(x)
	}
	return x
}

//go:noinline
func parse(n int) uint64 {
	var x uint64
	for i := 0; i < n; i++ {
		x += hashLoop(64)
	}
	return x
}

//go:noinline
func allocate() {
	b := make([]byte, 64<<10)
	keep = append(keep, b)
	if len(keep) > 64 {
		keep = keep[1:]
	}
}

func worker(ctx context.Context, kind string, stop <-chan struct{}) {
	pprof.Do(ctx, pprof.Labels("worker", kind), func(ctx context.Context) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if kind == "parse" {
				sink += parse(200)
			} else {
				sink += hashLoop(20000)
			}
			allocate()
		}
	})
}

func main() {
	listen := flag.String("listen", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:0); the bound address is printed as `listening on ADDR`")
	cpu := flag.String("cpuprofile", "", "write a CPU profile of -seconds to this file and exit")
	heap := flag.String("heapprofile", "", "with -cpuprofile: also write a heap profile to this file")
	seconds := flag.Float64("seconds", 2, "length of the -cpuprofile recording")
	flag.Parse()
	runtime.MemProfileRate = 4096

	stop := make(chan struct{})
	ctx := context.Background()
	go worker(ctx, "hash", stop)
	go worker(ctx, "parse", stop)

	if *cpu != "" {
		f, err := os.Create(*cpu)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		time.Sleep(time.Duration(*seconds * float64(time.Second)))
		pprof.StopCPUProfile()
		f.Close()
		close(stop)
		if *heap != "" {
			h, err := os.Create(*heap)
			if err != nil {
				log.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(h, 0); err != nil {
				log.Fatal(err)
			}
			h.Close()
		}
		return
	}
	if *listen == "" {
		log.Fatal("give -listen ADDR or -cpuprofile FILE")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
