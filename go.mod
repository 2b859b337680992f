module github.com/shadowgate/shadowgate

go 1.26

require pgregory.net/rapid v1.3.0

require (
	go.etcd.io/bbolt v1.5.0
	go.yaml.in/yaml/v3 v3.0.4
)

require golang.org/x/sys v0.45.0 // indirect
