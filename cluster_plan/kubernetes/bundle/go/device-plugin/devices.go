package main

import (
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Device is one device node of a resource, as the host names it.
type Device struct {
	ID      string // its path under /dev, `/` as `_`: nvidia0, accel_accel1 (unique per node)
	Path    string // on the host: /dev/accel/accel1
	Index   string // its number, for the container's variable: 1
	Healthy bool
}

var trailingNumber = regexp.MustCompile(`([0-9]+)$`)

// Scan finds the devices of a glob under root (where the host's / is seen: "" or /host),
// in the order of their numbers.
func Scan(root, glob string) []Device {
	matches, _ := filepath.Glob(filepath.Join(root, glob)) // the glob was checked with the config
	devices := make([]Device, 0, len(matches))
	for _, match := range matches {
		path := "/" + strings.TrimPrefix(strings.TrimPrefix(match, root), "/")
		id := strings.ReplaceAll(strings.TrimPrefix(path, "/dev/"), "/", "_")
		devices = append(devices, Device{ID: id, Path: path, Index: trailingNumber.FindString(id), Healthy: true})
	}
	sort.Slice(devices, func(i, j int) bool { return less(devices[i], devices[j]) })
	return devices
}

func less(a, b Device) bool {
	x, errX := strconv.Atoi(a.Index)
	y, errY := strconv.Atoi(b.Index)
	if errX == nil && errY == nil && x != y {
		return x < y
	}
	return a.Path < b.Path
}

// Merge keeps every device once seen: one that is gone is Unhealthy (the kubelet stops
// granting it but keeps counting it, so pods holding it are not lost), one that is back or
// new is Healthy. Reports whether anything changed.
func Merge(known, found []Device) ([]Device, bool) {
	present := map[string]Device{}
	for _, d := range found {
		present[d.Path] = d
	}
	merged := make([]Device, 0, len(known)+len(found))
	changed := false
	for _, d := range known {
		_, here := present[d.Path]
		if d.Healthy != here {
			changed = true
		}
		d.Healthy = here
		merged = append(merged, d)
		delete(present, d.Path)
	}
	for _, d := range found {
		if _, new := present[d.Path]; new {
			merged = append(merged, d)
			changed = true
		}
	}
	sort.Slice(merged, func(i, j int) bool { return less(merged[i], merged[j]) })
	return merged, changed
}
