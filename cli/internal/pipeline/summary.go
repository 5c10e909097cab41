package pipeline

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Summary writes what the pipeline does, without secrets: no database URL, no Kafka
// property values.
func (p *Pipeline) Summary(w io.Writer) error {
	c := p.Config.WithDefaults()
	db := "?"
	if cfg, err := pgxpool.ParseConfig(c.DatabaseURL); err == nil {
		cc := cfg.ConnConfig
		db = fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
	}
	brokers := c.Brokers
	if brokers == "" {
		brokers = fmt.Sprint(c.Kafka["bootstrap.servers"])
	}
	props := sortedKeys(c.Kafka)
	if len(props) == 0 {
		props = []string{"none"}
	}
	http := p.HTTP
	if http == "" {
		http = "off"
	}
	lines := [][2]string{
		{"pipeline", c.Pipeline},
		{"kafka", fmt.Sprintf("group %s, topics %s, brokers %s", c.GroupID, strings.Join(c.Topics, ", "), brokers)},
		{"", fmt.Sprintf("initial position %s, commit to kafka %t", c.InitialPosition, c.CommitToKafka)},
		{"", fmt.Sprintf("properties: %s (values not shown)", strings.Join(props, ", "))},
		{"database", fmt.Sprintf("%s, schema %s, isolation %s, auto_migrate %t", db, c.Schema, c.IsolationLevel, c.AutoMigrate)},
		{"sink", p.PluginType},
	}
	// The plugin's routes, when it routes by topic (table, upsert, inbox around them, cdc).
	if r, ok := c.Plugin.(interface{ RouteSummary() []string }); ok {
		for i, route := range r.RouteSummary() {
			label := ""
			if i == 0 {
				label = "routes"
			}
			lines = append(lines, [2]string{label, route})
		}
	}
	lines = append(lines, [][2]string{
		{"on_poison", c.OnPoison.String()},
		{"batch", fmt.Sprintf("max %d records, %s, wait %s; %s buffered per partition",
			c.MaxBatchRecords, sizeText(c.MaxBatchBytes), c.MaxBatchWait, sizeText(c.MaxBufferedBytes))},
		{"http", http},
	}...)
	if r := p.SchemaRegistry; r != nil {
		auth := "no auth"
		switch {
		case r.BearerToken != "":
			auth = "bearer token"
		case r.Username != "":
			auth = "basic auth as " + r.Username
		}
		u := r.URL
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			pu.User = nil
			u = pu.String()
		}
		lines = append(lines, [2]string{"registry", fmt.Sprintf("%s, %s", u, auth)})
	}
	for _, l := range lines {
		label := ""
		if l[0] != "" {
			label = l[0] + ":"
		}
		if _, err := fmt.Fprintf(w, "%-11s%s\n", label, p.redact.redact(l[1])); err != nil {
			return err
		}
	}
	return nil
}

// sizeText writes n bytes in the largest binary unit that divides it.
func sizeText(n int) string {
	for _, u := range []struct {
		name string
		size int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
