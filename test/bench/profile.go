package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// startProfiles starts the CPU profile (cpu, a path) and the heap profile at the peak
// (heapPath), each when its path is not empty; the function returned stops both.
func startProfiles(cpu, heapPath string) (func(), error) {
	stopCPU, stopHeap := func() {}, func() {}
	if cpu != "" {
		var err error
		if stopCPU, err = startCPUProfile(cpu); err != nil {
			return nil, err
		}
	}
	if heapPath != "" {
		stopHeap = startHeapProfile(heapPath)
	}
	return func() { stopHeap(); stopCPU() }, nil
}

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// startHeapProfile writes the heap profile to path each time the Go heap in use is the
// largest seen so far (checked every 250 ms): the profile of the child's peak, whose bytes
// say what Go holds there (RSS beyond them is C memory: librdkafka's queues).
func startHeapProfile(path string) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var peak uint64
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= peak {
				continue
			}
			peak = ms.HeapInuse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
	return func() { close(done); <-stopped }
}
