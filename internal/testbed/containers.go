package testbed

import "errors"

// startContainers is where a Docker engine would provide the services; see
// containers_docker.go.
var startContainers = func() (Env, error) {
	return Env{}, errors.New("they are not set")
}
