// Package plugin is the registry of sink plugins by name, for pipeline config files: a
// plugin package registers a factory in an init function (Register, RegisterConfig), and the
// config loader builds the plugin that a file's `sink: {type: name}` section names (Build)
// from that section (Config).
//
// A custom eosink binary imports its plugin packages for their side effect and calls
// cli.Main. A Go program that builds its plugin itself and hands it to sink.Config.Plugin
// needs none of this package.
package plugin
