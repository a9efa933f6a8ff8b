package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Resource is one extended resource the plugin serves: the device nodes that are its devices,
// and the variable that tells a container which of them it was granted.
type Resource struct {
	Name    string `json:"name"`    // nvidia.com/gpu, cluster-plan.io/tpu
	Devices string `json:"devices"` // a glob of device nodes on the host: /dev/accel/accel*
	Env     string `json:"env"`     // NVIDIA_VISIBLE_DEVICES, TPU_VISIBLE_DEVICES
	// Time-slicing: each device is offered this many times (0 or 1: once), as NVIDIA's
	// plugin does; containers granted replicas of one device share its node.
	Replicas int `json:"replicas,omitempty"`
}

// Config is the plugin's configuration file (the DaemonSet's ConfigMap).
type Config struct {
	Resources []Resource `json:"resources"`
}

// The kubelet takes a qualified name outside kubernetes.io: a DNS subdomain, a slash, a name.
var (
	resourceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ParseConfig reads the configuration and says everything that is wrong with it at once.
func ParseConfig(data []byte) (Config, error) {
	var config Config
	decoder := json.NewDecoder(strings.NewReader(string(data)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&config); err != nil {
		return Config{}, fmt.Errorf("not a device plugin configuration: %w", err)
	}
	var problems []string
	if len(config.Resources) == 0 {
		problems = append(problems, "no resources")
	}
	seen := map[string]bool{}
	for i, r := range config.Resources {
		where := fmt.Sprintf("resources[%d]", i)
		if !resourceName.MatchString(r.Name) || strings.HasSuffix(strings.Split(r.Name, "/")[0], "kubernetes.io") {
			problems = append(problems, fmt.Sprintf("%s: %q is not an extended resource name like example.com/device", where, r.Name))
		}
		if seen[r.Name] {
			problems = append(problems, fmt.Sprintf("%s: %s is served twice", where, r.Name))
		}
		seen[r.Name] = true
		if _, err := filepath.Match(r.Devices, ""); err != nil || !strings.HasPrefix(r.Devices, "/dev/") {
			problems = append(problems, fmt.Sprintf("%s: devices %q is not a glob under /dev/", where, r.Devices))
		}
		if r.Replicas < 0 || r.Replicas > 64 {
			problems = append(problems, fmt.Sprintf("%s: replicas %d is not 0 to 64", where, r.Replicas))
		}
		if !envName.MatchString(r.Env) {
			problems = append(problems, fmt.Sprintf("%s: env %q is not a variable name", where, r.Env))
		}
	}
	if len(problems) > 0 {
		return Config{}, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return config, nil
}

// LoadConfig reads and parses the configuration file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	config, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return config, nil
}

// SocketName is the plugin's socket for a resource in the kubelet's device-plugins directory.
func SocketName(resource string) string {
	return "cluster-plan-" + strings.ReplaceAll(resource, "/", "_") + ".sock"
}

// Describe says what the plugin offers of a resource from the devices found: one line, as
// --check prints it.
func Describe(r Resource, devices []Device) string {
	replicas := r.Replicas
	if replicas < 1 {
		replicas = 1
	}
	paths := make([]string, 0, len(devices))
	for _, d := range devices {
		paths = append(paths, d.Path)
	}
	return fmt.Sprintf("%s: %d devices x %d replicas = %d from %s [%s] env %s",
		r.Name, len(devices), replicas, len(devices)*replicas, r.Devices, strings.Join(paths, " "), r.Env)
}
