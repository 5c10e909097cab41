package testbed

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Images used when a Docker engine provides the services.
const (
	kafkaImage    = "apache/kafka:4.1.1"
	postgresImage = "postgres:16-alpine"
)

// startContainers starts Kafka (KRaft) and PostgreSQL with testcontainers-go when a Docker
// engine answers. The containers are removed by testcontainers' reaper when the test
// process exits. It returns an error saying so when there is no engine.
func startContainers() (Env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return Env{}, fmt.Errorf("they are not set, and no Docker engine for testcontainers: %v", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return Env{}, fmt.Errorf("they are not set, and no Docker engine answers for testcontainers: %v", err)
	}

	pg, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        postgresImage,
			Env:          map[string]string{"POSTGRES_PASSWORD": "eosink", "POSTGRES_DB": "eosink"},
			Cmd:          []string{"postgres", "-c", "max_connections=300"},
			ExposedPorts: []string{"5432/tcp"},
			WaitingFor:   wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(2 * time.Minute),
		},
		Started: true,
	})
	if err != nil {
		return Env{}, fmt.Errorf("start PostgreSQL container: %v", err)
	}
	pgHost, err := pg.Host(ctx)
	if err != nil {
		return Env{}, err
	}
	pgPort, err := pg.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return Env{}, err
	}

	// The broker must advertise the address clients use, so its host port is chosen first.
	port, err := freePort()
	if err != nil {
		return Env{}, err
	}
	_, err = testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        kafkaImage,
			ExposedPorts: []string{strconv.Itoa(port) + ":9092/tcp"},
			Env: map[string]string{
				"KAFKA_NODE_ID":                                  "1",
				"KAFKA_PROCESS_ROLES":                            "broker,controller",
				"KAFKA_LISTENERS":                                "PLAINTEXT://:9092,CONTROLLER://:9093",
				"KAFKA_ADVERTISED_LISTENERS":                     "PLAINTEXT://127.0.0.1:" + strconv.Itoa(port),
				"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
				"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
				"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9093",
				"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
				"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
				"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
				"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
				"KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS":             "3000",
				"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                "false",
			},
			WaitingFor: wait.ForLog("Kafka Server started").WithStartupTimeout(2 * time.Minute),
		},
		Started: true,
	})
	if err != nil {
		return Env{}, fmt.Errorf("start Kafka container: %v", err)
	}
	return Env{
		Brokers:     "127.0.0.1:" + strconv.Itoa(port),
		DatabaseURL: fmt.Sprintf("postgres://postgres:eosink@%s/eosink?sslmode=disable", net.JoinHostPort(pgHost, pgPort.Port())),
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
