// Package opsview holds the JSON views that the eosink command's -json output and the
// console's management API (internal/console) both write, so that the two agree for the
// same data: the per-pipeline status summary (`eosink status -json`, GET /api/v1/pipelines)
// and a dead letter with its record (`eosink dlq show -json`, GET /api/v1/dead-letters/{id}).
// The other views (positions, dead-letter lists, changes) are package admin's types.
package opsview
