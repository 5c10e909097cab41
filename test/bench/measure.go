package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// serviceCPU returns the CPU seconds used so far by the Kafka broker and by PostgreSQL: every
// live postgres process plus what the postmaster has reaped (backends that already exited).
func serviceCPU() (kafka, postgres float64) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		switch {
		case name == "postgres":
			self, children := procCPU(d)
			postgres += self + children // children: reaped backends (postmaster only)
		case name == "java":
			cmd, _ := os.ReadFile(d + "/cmdline")
			if strings.Contains(string(cmd), "kafka.Kafka") {
				self, _ := procCPU(d)
				kafka += self
			}
		}
	}
	return kafka, postgres
}

// procCPU reads a process's own and its reaped children's CPU seconds from /proc/PID/stat.
func procCPU(dir string) (self, children float64) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:])
	// After the command: state is f[0]; utime, stime, cutime, cstime are fields 14-17 of
	// the whole line, f[11]..f[14] here.
	if len(f) < 15 {
		return 0, 0
	}
	tick := 100.0 // USER_HZ on Linux
	num := func(x string) float64 { v, _ := strconv.ParseFloat(x, 64); return v / tick }
	return num(f[11]) + num(f[12]), num(f[13]) + num(f[14])
}
