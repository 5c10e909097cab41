package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// services names this run's broker and PostgreSQL among the machine's processes, so that
// the CPU of other brokers and databases on a shared machine is not counted: the broker is
// the kafka.Kafka JVM whose server properties listen on the bootstrap port, PostgreSQL the
// postmaster of the database's data directory and its children. Unset (a service not found),
// every broker or every postgres process counts, as before.
var services struct {
	kafkaPort  string // ":29392"
	postmaster string // pid
}

// findServices fills services from the broker address and the database.
func findServices(ctx context.Context, brokers, url string) {
	if i := strings.LastIndexByte(strings.Split(brokers, ",")[0], ':'); i >= 0 {
		services.kafkaPort = strings.Split(brokers, ",")[0][i:]
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	var dir string
	if conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir) != nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		services.postmaster = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
}

// isOurBroker reports whether the kafka.Kafka process with command line args serves
// services.kafkaPort (its server properties name the port in listeners).
func isOurBroker(args []string) bool {
	if services.kafkaPort == "" {
		return true
	}
	for _, a := range args {
		if strings.HasSuffix(a, ".properties") && !strings.HasPrefix(a, "-") {
			b, err := os.ReadFile(a)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "listeners=") && strings.Contains(line, services.kafkaPort+",") ||
					strings.HasPrefix(strings.TrimSpace(line), "listeners=") && strings.HasSuffix(strings.TrimSpace(line), services.kafkaPort) {
					return true
				}
			}
		}
	}
	return false
}

// machineCPU returns the jiffies the whole machine has been busy and in all, summed over its
// CPUs (/proc/stat's first line; idle and iowait are not busy): what every process used,
// this run's or not.
func machineCPU() (busy, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest and guest_nice are counted in user and nice already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// busyShare is the share of the machine's CPU that was busy between two machineCPU readings.
func busyShare(b0, t0, b1, t1 uint64) float64 {
	if t1 <= t0 {
		return 0
	}
	return float64(b1-b0) / float64(t1-t0)
}

// serviceCPU returns the CPU seconds used so far by this run's Kafka broker and PostgreSQL:
// the postmaster, its live children and what it has reaped (backends that already exited).
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
			pid, ppid := filepath.Base(d), parentOf(d)
			if services.postmaster != "" && pid != services.postmaster && ppid != services.postmaster {
				continue
			}
			self, children := procCPU(d)
			postgres += self
			if services.postmaster == "" || pid == services.postmaster {
				postgres += children // reaped backends (postmaster only)
			}
		case name == "java":
			cmd, _ := os.ReadFile(d + "/cmdline")
			if strings.Contains(string(cmd), "kafka.Kafka") && isOurBroker(strings.Split(string(cmd), "\x00")) {
				self, _ := procCPU(d)
				kafka += self
			}
		}
	}
	return kafka, postgres
}

// parentOf reads the parent pid from /proc/PID/stat.
func parentOf(dir string) string {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return ""
	}
	return f[1]
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
