// Package console is the management API of eosink's operator console: JSON over HTTP,
// served by `eosink console -config FILE` (docs/console.md). It exposes what package admin
// does for the eosink command: pipelines with their partitions (position, epoch, owner alive
// or gone, lag, stop reason and remedy), dead letters (list with filters and paging, show,
// replay, discard), moving positions (dry run, then apply, audited with the operator the
// request's token names), and the audit of those moves. docs/openapi.yaml documents every
// path and shape; TestOpenAPI checks it against Routes and the response types.
//
// # Security
//
// The handler is read-only unless Config.Mutations is set. With Config.Tokens every request
// needs "Authorization: Bearer TOKEN", one of the tokens file's; a mutation is refused with
// 403 while mutations are off, with 401 without a valid token, and with 403 without the
// X-Eosink-CSRF: 1 header or when the browser says it comes from another origin
// (Sec-Fetch-Site, Origin; http.CrossOriginProtection). Every response carries a strict
// Content-Security-Policy, X-Content-Type-Options: nosniff and the other headers of
// securityHeaders. Every mutation is logged with its operator; a move of positions is also
// written to offsets_audit with it, as `eosink offsets set -operator` does.
//
// # Errors
//
// An error is JSON {"error": "...", "field": "..."}: 400 for bad input, naming the field
// (a path parameter, a query parameter, a body field or a header), 401, 403, 404, 405, 409
// (a conflict with the state: a position that moved meanwhile, a dead letter of another
// pipeline than the console's), 413, 415; 500 only for a failure of the database or the
// brokers, whose detail goes to the log.
package console
