package sqlsink_test

import (
	"log"
	"os"

	"github.com/eosink/eosink/sink"
	"github.com/eosink/eosink/sink/sqlsink"
)

// ExampleNew runs statements of your own for each record: a history row and a stock
// increment, in the batch's transaction, with the record's values as parameters.
func ExampleNew() {
	p, err := sqlsink.New(sqlsink.Config{
		Params: map[string]sqlsink.Param{
			"sku": {From: "value.sku", Required: true},
			"qty": {From: "value.qty"},
			"at":  {From: "timestamp"},
		},
		Statements: []string{
			"INSERT INTO inventory.history (sku, qty, at) VALUES (@sku, @qty, @at)",
			"UPDATE inventory.stock SET qty = qty + @qty WHERE sku = @sku",
		},
	})
	if err != nil {
		log.Fatal(err) // a *sink.ConfigError naming the field, such as statements[1]
	}
	s, err := sink.New(sink.Config{
		Brokers:     os.Getenv("KAFKA_BOOTSTRAP_SERVERS"),
		GroupID:     "inventory",
		Topics:      []string{"inventory"},
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Plugin:      p,
		OnPoison:    sink.DeadLetter,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = s // s.Run(ctx) consumes until ctx is done, then drains
}
