// cluster-plan-device-plugin advertises a node's accelerators to the kubelet as the cluster
// plan declares them (one extended resource per class: nvidia.com/gpu, cluster-plan.io/tpu),
// from the device nodes present on the node, over the kubelet's device plugin API v1beta1.
// A device node that disappears is reported Unhealthy; a container gets exactly the device
// nodes it was granted. docs/kubernetes.md, "The device plugin".
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Run serves every resource of the configuration until ctx ends: a resource is registered
// once one of its device nodes is there, and again whenever the kubelet has restarted.
func Run(ctx context.Context, config Config, root, dir string, interval time.Duration) {
	plugins := make([]*Plugin, 0, len(config.Resources))
	for _, resource := range config.Resources {
		plugins = append(plugins, NewPlugin(resource, root, dir))
	}
	kubelet := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		for _, plugin := range plugins {
			plugin.Rescan()
			if plugin.Present() == 0 && !plugin.Serving() {
				continue // nothing of this class on the node (yet)
			}
			if !plugin.Serving() {
				if err := plugin.Start(kubelet); err != nil {
					log.Printf("%v (trying again in %s)", err, interval)
					continue
				}
				log.Printf("serving %s: %d devices (%s)", plugin.resource.Name, plugin.Present(), plugin.resource.Devices)
			}
		}
		select {
		case <-ctx.Done():
			for _, plugin := range plugins {
				plugin.Stop()
			}
			return
		case <-ticker.C:
		}
	}
}

func main() {
	configPath := flag.String("config", "/etc/cluster-plan-device-plugin/config.json", "the resources to serve (JSON)")
	root := flag.String("host-root", "", "where the host's root is mounted: device globs are looked up under it")
	dir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	interval := flag.Duration("interval", 5*time.Second, "how often device nodes are looked for again")
	check := flag.Bool("check", false, "read the configuration, print what it serves and from which device nodes, and exit")
	flag.Parse()
	config, err := LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster-plan-device-plugin: %v\n", err)
		os.Exit(2)
	}
	if *check {
		for _, resource := range config.Resources {
			fmt.Println(Describe(resource, Scan(*root, resource.Devices)))
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	Run(ctx, config, *root, *dir, *interval)
}
