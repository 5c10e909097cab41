package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/eosink/eosink/admin"
)

// editFlags checks the flags of eosink dlq edit -id N (-value-file F | -value S)
// [-key-file F | -key S] -operator NAME -reason TEXT, before any connection, and returns
// the edit.
func editFlags(fs *flag.FlagSet, d *dlqFlags, f admin.DeadLetterFilter) (admin.DeadLetterEdit, error) {
	var e admin.DeadLetterEdit
	if len(f.IDs) != 1 {
		return e, usageError{errors.New("dlq edit: -id N is required (one id)")}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	value, err := textOrFile("value", d.value, set["value"], d.valueFile, set["value-file"])
	if err != nil {
		return e, err
	}
	key, err := textOrFile("key", d.key, set["key"], d.keyFile, set["key-file"])
	if err != nil {
		return e, err
	}
	switch {
	case value == nil && key == nil:
		return e, usageError{errors.New("dlq edit: give the corrected value with -value-file F or -value S (and the key with -key-file or -key)")}
	case d.operator == "":
		return e, usageError{errors.New("dlq edit: -operator NAME is required: who edits, for the audit")}
	case d.reason == "":
		return e, usageError{errors.New("dlq edit: -reason TEXT is required: why, for the audit")}
	}
	return admin.DeadLetterEdit{Key: key, Value: value, Action: admin.Action{Operator: d.operator, Reason: d.reason}}, nil
}

// dlqEdit stores the edit beside the dead letter's original key and value, which stay, and
// audits it (admin.Client.EditDeadLetter).
func dlqEdit(ctx context.Context, c *admin.Client, id int64, e admin.DeadLetterEdit, asJSON bool, stdout io.Writer) error {
	if err := c.EditDeadLetter(ctx, id, e); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, map[string]any{"edited": id})
	}
	fmt.Fprintf(stdout, "edited dead letter %d (the original is kept; eosink dlq replay applies the edit)\n", id)
	return nil
}

// textOrFile returns the bytes of -NAME (text) or -NAME-file, nil when neither is set.
func textOrFile(name, text string, textSet bool, file string, fileSet bool) ([]byte, error) {
	switch {
	case textSet && fileSet:
		return nil, usageError{fmt.Errorf("dlq edit: -%s and -%s-file exclude each other", name, name)}
	case textSet:
		return []byte(text), nil
	case fileSet:
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("dlq edit: -%s-file: %w", name, err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return nil, nil
}
