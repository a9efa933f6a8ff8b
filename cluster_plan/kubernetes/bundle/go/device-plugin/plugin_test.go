package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const wait = 10 * time.Second

// kubelet is a fake kubelet's registration service on kubelet.sock in a directory of its own.
type kubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir      string
	requests chan *pluginapi.RegisterRequest
}

func (k *kubelet) Register(_ context.Context, request *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.requests <- request
	return &pluginapi.Empty{}, nil
}

func startKubelet(t *testing.T) *kubelet {
	t.Helper()
	// a short path: a unix socket's name has room for 107 bytes
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &kubelet{dir: dir, requests: make(chan *pluginapi.RegisterRequest, 8)}
	listener, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(server, k)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	return k
}

func (k *kubelet) registered(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case request := <-k.requests:
		return request
	case <-time.After(wait):
		t.Fatal("the plugin did not register")
		return nil
	}
}

// node is a host root with device nodes: plain files stand in for them (presence is health).
func node(t *testing.T, devices ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, device := range devices {
		touch(t, root, device)
	}
	return root
}

func touch(t *testing.T, root, device string) {
	t.Helper()
	path := filepath.Join(root, device)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

var accel = Resource{Name: "cluster-plan.io/tpu", Devices: "/dev/accel/accel*", Env: "TPU_VISIBLE_DEVICES"}

func run(t *testing.T, k *kubelet, root string, resources ...Resource) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Resources: resources}, root, k.dir, 20*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func dial(t *testing.T, k *kubelet, request *pluginapi.RegisterRequest) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, request.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func health(response *pluginapi.ListAndWatchResponse) map[string]string {
	out := map[string]string{}
	for _, d := range response.Devices {
		out[d.ID] = d.Health
	}
	return out
}

func TestRegistersEachResourceWithDevicesAtItsSocket(t *testing.T) {
	k := startKubelet(t)
	gpu := Resource{Name: "nvidia.com/gpu", Devices: "/dev/nvidia[0-9]*", Env: "NVIDIA_VISIBLE_DEVICES"}
	run(t, k, node(t, "dev/accel/accel0"), accel, gpu)
	request := k.registered(t)
	if request.Version != "v1beta1" || request.ResourceName != "cluster-plan.io/tpu" {
		t.Fatalf("registered %+v", request)
	}
	if request.Endpoint != "cluster-plan-cluster-plan.io_tpu.sock" {
		t.Fatalf("endpoint %q", request.Endpoint)
	}
	if _, err := os.Stat(filepath.Join(k.dir, request.Endpoint)); err != nil {
		t.Fatal(err)
	}
	select { // no /dev/nvidia* on this node: nvidia.com/gpu is not offered
	case other := <-k.requests:
		t.Fatalf("registered %s without its devices", other.ResourceName)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestListAndWatchReportsTheDevicesAndARemovedOneUnhealthy(t *testing.T) {
	k := startKubelet(t)
	root := node(t, "dev/accel/accel0", "dev/accel/accel1", "dev/accel/other")
	run(t, k, root, accel)
	client := dial(t, k, k.registered(t))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"accel_accel0": "Healthy", "accel_accel1": "Healthy"}
	if got := health(first); len(got) != 2 || got["accel_accel0"] != want["accel_accel0"] || got["accel_accel1"] != want["accel_accel1"] {
		t.Fatalf("devices %v, want %v", got, want)
	}
	if err := os.Remove(filepath.Join(root, "dev/accel/accel1")); err != nil {
		t.Fatal(err)
	}
	second, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := health(second); got["accel_accel0"] != "Healthy" || got["accel_accel1"] != "Unhealthy" {
		t.Fatalf("after removing accel1: %v", got)
	}
	touch(t, root, "dev/accel/accel1")
	third, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := health(third); got["accel_accel1"] != "Healthy" {
		t.Fatalf("after accel1 came back: %v", got)
	}
}

func TestAllocateGivesExactlyTheGrantedDevices(t *testing.T) {
	k := startKubelet(t)
	run(t, k, node(t, "dev/accel/accel0", "dev/accel/accel1", "dev/accel/accel2"), accel)
	client := dial(t, k, k.registered(t))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	response, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"accel_accel2", "accel_accel0"}},
		{DevicesIds: []string{"accel_accel1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(response.ContainerResponses) != 2 {
		t.Fatalf("%d container responses", len(response.ContainerResponses))
	}
	first := response.ContainerResponses[0]
	var paths []string
	for _, spec := range first.Devices {
		if spec.HostPath != spec.ContainerPath || spec.Permissions != "rw" {
			t.Fatalf("device spec %+v", spec)
		}
		paths = append(paths, spec.HostPath)
	}
	if strings.Join(paths, " ") != "/dev/accel/accel2 /dev/accel/accel0" {
		t.Fatalf("first container got %v", paths)
	}
	if first.Envs["TPU_VISIBLE_DEVICES"] != "2,0" {
		t.Fatalf("first container's variables %v", first.Envs)
	}
	second := response.ContainerResponses[1]
	if len(second.Devices) != 1 || second.Devices[0].HostPath != "/dev/accel/accel1" || second.Envs["TPU_VISIBLE_DEVICES"] != "1" {
		t.Fatalf("second container got %+v", second)
	}
	_, err = client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"accel_accel9"}},
	}})
	if err == nil || !strings.Contains(err.Error(), `no device "accel_accel9"`) {
		t.Fatalf("an unknown device: %v", err)
	}
}

func TestTimeSlicingOffersEachDeviceReplicasTimes(t *testing.T) {
	k := startKubelet(t)
	shared := Resource{Name: "nvidia.com/gpu", Devices: "/dev/nvidia[0-9]*", Env: "NVIDIA_VISIBLE_DEVICES", Replicas: 3}
	run(t, k, node(t, "dev/nvidia0", "dev/nvidia1", "dev/nvidiactl"), shared)
	client := dial(t, k, k.registered(t))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := health(listed); len(got) != 6 || got["nvidia1::2"] != "Healthy" {
		t.Fatalf("devices %v", got)
	}
	response, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"nvidia1::0", "nvidia1::2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	answer := response.ContainerResponses[0]
	if len(answer.Devices) != 1 || answer.Devices[0].HostPath != "/dev/nvidia1" || answer.Envs["NVIDIA_VISIBLE_DEVICES"] != "1" {
		t.Fatalf("two replicas of nvidia1 gave %+v", answer)
	}
}

func TestRegistersAgainWhenTheKubeletRestarts(t *testing.T) {
	k := startKubelet(t)
	run(t, k, node(t, "dev/accel/accel0"), accel)
	request := k.registered(t)
	// a starting kubelet removes every plugin's socket
	if err := os.Remove(filepath.Join(k.dir, request.Endpoint)); err != nil {
		t.Fatal(err)
	}
	again := k.registered(t)
	if again.ResourceName != accel.Name {
		t.Fatalf("registered %s", again.ResourceName)
	}
	if _, err := os.Stat(filepath.Join(k.dir, again.Endpoint)); err != nil {
		t.Fatal(err)
	}
}

func TestAConfigurationIsCheckedWhole(t *testing.T) {
	_, err := ParseConfig([]byte(`{"resources": [
		{"name": "gpu", "devices": "/dev/nvidia*", "env": "X"},
		{"name": "example.com/a", "devices": "/sys/x", "env": "1X"},
		{"name": "example.com/a", "devices": "/dev/[", "env": "A", "replicas": -1}]}`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`"gpu" is not an extended resource`, `"/sys/x" is not a glob under /dev/`, `env "1X"`, "example.com/a is served twice", `"/dev/[" is not a glob`, "replicas -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if _, err := ParseConfig([]byte(`{"resources": [], "extra": 1}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	config, err := ParseConfig([]byte(`{"resources": [{"name": "cluster-plan.io/tpu", "devices": "/dev/accel/accel*", "env": "TPU_VISIBLE_DEVICES"}]}`))
	if err != nil || config.Resources[0] != accel {
		t.Fatalf("%+v, %v", config, err)
	}
}

func TestDevicesAreInTheOrderOfTheirNumbers(t *testing.T) {
	root := node(t, "dev/nvidia10", "dev/nvidia2", "dev/nvidia0", "dev/nvidiactl")
	var ids []string
	for _, d := range Scan(root, "/dev/nvidia[0-9]*") {
		ids = append(ids, d.ID+"="+d.Index)
	}
	if strings.Join(ids, " ") != "nvidia0=0 nvidia2=2 nvidia10=10" {
		t.Fatalf("%v", ids)
	}
}

func TestDescribeCountsReplicas(t *testing.T) {
	shared := Resource{Name: "nvidia.com/gpu", Devices: "/dev/nvidia[0-9]*", Env: "NVIDIA_VISIBLE_DEVICES", Replicas: 4}
	root := node(t, "dev/nvidia0", "dev/nvidia1", "dev/nvidiactl")
	got := Describe(shared, Scan(root, shared.Devices))
	want := "nvidia.com/gpu: 2 devices x 4 replicas = 8 from /dev/nvidia[0-9]* [/dev/nvidia0 /dev/nvidia1] env NVIDIA_VISIBLE_DEVICES"
	if got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got := Describe(accel, nil); !strings.HasPrefix(got, "cluster-plan.io/tpu: 0 devices x 1 replicas = 0 ") {
		t.Fatalf("%q", got)
	}
}
