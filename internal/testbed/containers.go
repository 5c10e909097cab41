package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Images used when a Docker engine provides the services: the public ones unless
// EOSINK_TEST_KAFKA_IMAGE and EOSINK_TEST_POSTGRES_IMAGE name others. `make test-docker`
// builds both locally, with no registry (test/docker/images.sh: Kafka from the Maven Central
// jars on Debian's Java runtime, PostgreSQL from Debian's packages), and names them so. Any
// image configured as the public ones are works: Kafka by KAFKA_* variables (a server
// property each), PostgreSQL by POSTGRES_PASSWORD and POSTGRES_DB, and `postgres -c ...`.
const (
	defaultKafkaImage    = "apache/kafka:4.1.1"
	defaultPostgresImage = "postgres:16-alpine"
)

// containerLabel marks the containers the test bed starts, with the test process's pid as
// its value, so that what a killed test process left behind can be found and removed
// (test/docker/test-docker.sh does).
const containerLabel = "org.eosink.testbed"

var (
	containersMu sync.Mutex
	containers   []testcontainers.Container
)

func imageFromEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// hostNetwork runs a container in the host's network namespace: its servers listen on the
// loopback ports given to them, and no bridge network is needed.
func hostNetwork(hc *container.HostConfig) { hc.NetworkMode = "host" }

// startContainers starts Kafka (KRaft) and PostgreSQL with testcontainers-go when a Docker
// engine answers, on host networking, listening on free loopback ports. StopContainers
// removes them; with testcontainers' reaper on (TESTCONTAINERS_RYUK_DISABLED unset), the
// reaper also removes them when the test process exits. It returns an error saying so when
// there is no engine.
func startContainers() (Env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The host network as testcontainers' default network: otherwise, on an engine without
	// the default bridge (dockerd --bridge=none), it would create a bridge network of its own.
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithDefaultBridgeNetwork("host"))
	if err != nil {
		return Env{}, fmt.Errorf("they are not set, and no Docker engine for testcontainers: %v", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return Env{}, fmt.Errorf("they are not set, and no Docker engine answers for testcontainers: %v", err)
	}
	labels := map[string]string{containerLabel: strconv.Itoa(os.Getpid())}

	pgPort, err := freePort()
	if err != nil {
		return Env{}, err
	}
	port := strconv.Itoa(pgPort)
	pgImage := imageFromEnv("EOSINK_TEST_POSTGRES_IMAGE", defaultPostgresImage)
	if err := startContainer(ctx, provider, testcontainers.ContainerRequest{
		Image:  pgImage,
		Labels: labels,
		Env:    map[string]string{"POSTGRES_PASSWORD": "eosink", "POSTGRES_DB": "eosink", "PGPORT": port},
		Cmd: []string{"postgres", "-c", "port=" + port, "-c", "listen_addresses=127.0.0.1",
			"-c", "max_connections=300", "-c", "wal_level=logical"},
		HostConfigModifier: hostNetwork,
		// Over TCP, so that an image's first start (a server on its socket only, to create the
		// database) does not count as ready.
		WaitingFor: wait.ForExec([]string{"pg_isready", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d", "eosink"}).
			WithStartupTimeout(2 * time.Minute).WithPollInterval(500 * time.Millisecond),
	}); err != nil {
		return Env{}, fmt.Errorf("start PostgreSQL container (%s): %v", pgImage, err)
	}

	// The broker listens on a free pair of loopback ports: port for clients, port+1 for its
	// controller.
	kport, err := freePortPairErr()
	if err != nil {
		return Env{}, err
	}
	broker := "127.0.0.1:" + strconv.Itoa(kport)
	controller := "127.0.0.1:" + strconv.Itoa(kport+1)
	kafkaImage := imageFromEnv("EOSINK_TEST_KAFKA_IMAGE", defaultKafkaImage)
	if err := startContainer(ctx, provider, testcontainers.ContainerRequest{
		Image:  kafkaImage,
		Labels: labels,
		Env: map[string]string{
			"KAFKA_NODE_ID":                                          "1",
			"KAFKA_PROCESS_ROLES":                                    "broker,controller",
			"KAFKA_LISTENERS":                                        "PLAINTEXT://" + broker + ",CONTROLLER://" + controller,
			"KAFKA_ADVERTISED_LISTENERS":                             "PLAINTEXT://" + broker,
			"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
			"KAFKA_INTER_BROKER_LISTENER_NAME":                       "PLAINTEXT",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                         "1@" + controller,
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
			"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":                     "8",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
			"KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS":             "4",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
			"KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS":                     "3000",
			"KAFKA_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS":            "3000",
			"KAFKA_GROUP_CONSUMER_SESSION_TIMEOUT_MS":                "10000",
			"KAFKA_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS":         "500",
			"KAFKA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS":             "1000",
			"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
			"KAFKA_DELETE_TOPIC_ENABLE":                              "true",
		},
		HostConfigModifier: hostNetwork,
		WaitingFor:         wait.ForLog("Kafka Server started").WithStartupTimeout(2 * time.Minute),
	}); err != nil {
		return Env{}, fmt.Errorf("start Kafka container (%s): %v", kafkaImage, err)
	}
	return Env{
		Brokers:     broker,
		DatabaseURL: fmt.Sprintf("postgres://postgres:eosink@127.0.0.1:%d/eosink?sslmode=disable", pgPort),
	}, nil
}

// startContainer starts one container and records it for StopContainers, also when it
// started but did not become ready.
func startContainer(ctx context.Context, provider *testcontainers.DockerProvider, req testcontainers.ContainerRequest) error {
	c, err := provider.RunContainer(ctx, req)
	if c != nil {
		containersMu.Lock()
		containers = append(containers, c)
		containersMu.Unlock()
	}
	return err
}

// StopContainers removes the containers this process's test bed started, if any. A package
// whose tests may run on the container path calls it from TestMain after m.Run, as the
// testcontainers reaper may be off (it cannot be pulled where no registry is reachable).
func StopContainers() {
	containersMu.Lock()
	cs := containers
	containers = nil
	containersMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: removing container %s: %v\n", c.GetContainerID(), err)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePortPairErr returns a loopback port p such that p and p+1 were both free.
func freePortPairErr() (int, error) {
	for i := 0; i < 50; i++ {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1)); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free pair of loopback ports")
}
