package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const registerTimeout = 10 * time.Second

// Plugin serves one resource on its own socket in the kubelet's device-plugins directory.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource Resource
	root     string // where the host's / is seen ("" when the plugin runs on the host)
	dir      string // the kubelet's device-plugins directory

	mu      sync.Mutex
	devices []Device
	changed chan struct{} // closed, and replaced, whenever the devices change
	server  *grpc.Server
	stopped chan struct{}
}

// NewPlugin makes the plugin of one resource; it serves nothing until Start.
func NewPlugin(resource Resource, root, dir string) *Plugin {
	return &Plugin{resource: resource, root: root, dir: dir, changed: make(chan struct{})}
}

func (p *Plugin) socket() string { return filepath.Join(p.dir, SocketName(p.resource.Name)) }

// Serving reports whether the plugin serves its socket and the socket is still there: the
// kubelet removes every plugin's socket when it starts, and the plugin must register again.
func (p *Plugin) Serving() bool {
	p.mu.Lock()
	server := p.server
	p.mu.Unlock()
	if server == nil {
		return false
	}
	_, err := os.Stat(p.socket())
	return err == nil
}

// Rescan looks for the resource's device nodes again; a change reaches every ListAndWatch.
func (p *Plugin) Rescan() {
	found := Scan(p.root, p.resource.Devices)
	p.mu.Lock()
	defer p.mu.Unlock()
	merged, changed := Merge(p.devices, found)
	if changed {
		p.devices = merged
		close(p.changed)
		p.changed = make(chan struct{})
	}
}

// Present reports how many of the resource's device nodes are there.
func (p *Plugin) Present() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, d := range p.devices {
		if d.Healthy {
			n++
		}
	}
	return n
}

// Start serves the socket and registers the resource with the kubelet at kubeletSocket.
func (p *Plugin) Start(kubeletSocket string) error {
	p.Stop()
	socket := p.socket()
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = server.Serve(listener)
	}()
	p.mu.Lock()
	p.server, p.stopped = server, stopped
	p.mu.Unlock()
	if err := p.register(kubeletSocket); err != nil {
		p.Stop()
		return fmt.Errorf("registering %s with the kubelet at %s: %w", p.resource.Name, kubeletSocket, err)
	}
	return nil
}

// Stop ends the server (and every ListAndWatch) and removes the socket.
func (p *Plugin) Stop() {
	p.mu.Lock()
	server, stopped := p.server, p.stopped
	p.server = nil
	p.mu.Unlock()
	if server == nil {
		return
	}
	server.Stop()
	<-stopped
	_ = os.Remove(p.socket())
}

func (p *Plugin) register(kubeletSocket string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     SocketName(p.resource.Name),
		ResourceName: p.resource.Name,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	return err
}

// replicaIDs are the IDs the kubelet knows a device by: its own, or one per replica.
func (p *Plugin) replicaIDs(d Device) []string {
	if p.resource.Replicas <= 1 {
		return []string{d.ID}
	}
	ids := make([]string, 0, p.resource.Replicas)
	for i := 0; i < p.resource.Replicas; i++ {
		ids = append(ids, fmt.Sprintf("%s::%d", d.ID, i))
	}
	return ids
}

func (p *Plugin) snapshot() ([]*pluginapi.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pluginapi.Device, 0, len(p.devices))
	for _, d := range p.devices {
		health := pluginapi.Unhealthy
		if d.Healthy {
			health = pluginapi.Healthy
		}
		for _, id := range p.replicaIDs(d) {
			out = append(out, &pluginapi.Device{ID: id, Health: health})
		}
	}
	return out, p.changed
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices, then again every time they change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devices, changed := p.snapshot()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Allocate gives each container exactly the devices the kubelet granted it: their device
// nodes at the host's paths, and the resource's variable listing their numbers.
func (p *Plugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	byID := map[string]Device{}
	for _, d := range p.devices {
		for _, id := range p.replicaIDs(d) {
			byID[id] = d
		}
	}
	p.mu.Unlock()
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		answer := &pluginapi.ContainerAllocateResponse{}
		var indexes []string
		given := map[string]bool{}
		for _, id := range container.DevicesIds {
			device, known := byID[id]
			if !known {
				return nil, status.Errorf(codes.InvalidArgument, "%s: no device %q on this node", p.resource.Name, id)
			}
			if !device.Healthy {
				return nil, status.Errorf(codes.FailedPrecondition, "%s: %s is gone", p.resource.Name, device.Path)
			}
			if given[device.Path] { // two replicas of one device: its node once
				continue
			}
			given[device.Path] = true
			answer.Devices = append(answer.Devices, &pluginapi.DeviceSpec{
				ContainerPath: device.Path,
				HostPath:      device.Path,
				Permissions:   "rw",
			})
			indexes = append(indexes, device.Index)
		}
		answer.Envs = map[string]string{p.resource.Env: strings.Join(indexes, ",")}
		response.ContainerResponses = append(response.ContainerResponses, answer)
	}
	return response, nil
}

// PreStartContainer is never asked for (the options say so).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
