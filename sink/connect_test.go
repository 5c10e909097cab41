package sink

import (
	"errors"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestConnectFailure: librdkafka's authentication and TLS error events end the start with the
// named sentinel and the cause; a broker that is merely down is waited out.
func TestConnectFailure(t *testing.T) {
	s, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ev   kafka.Error
		want error  // nil: keep waiting
		hint string // in the message
	}{
		{kafka.NewError(kafka.ErrAuthentication, "sasl_ssl://b:9094/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512", false),
			ErrKafkaAuthentication, "check sasl.mechanism, sasl.username and sasl.password"},
		{kafka.NewError(kafka.ErrSsl, "sasl_ssl://b:9094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified", false),
			ErrKafkaTLS, "the broker's certificate could not be verified"},
		{kafka.NewError(kafka.ErrTransport, "ssl://b:9095/bootstrap: Receive failed: error:0A000412:SSL routines::sslv3 alert bad certificate: SSL alert number 42", false),
			ErrKafkaTLS, "the broker refused the client certificate"},
		{kafka.NewError(kafka.ErrTransport, "b:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused", false), nil, ""},
		{kafka.NewError(kafka.ErrAllBrokersDown, "1/1 brokers are down", false), nil, ""},
	}
	for _, c := range cases {
		err := s.connectFailure(c.ev)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%v: got %v, want to keep waiting", c.ev, err)
		case c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(err.Error(), c.hint) || !strings.Contains(err.Error(), c.ev.Error())):
			t.Errorf("%v: got %v, want %v with %q and the event", c.ev, err, c.want, c.hint)
		}
	}
}
