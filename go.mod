module github.com/flakeid/flakeid

go 1.26

require (
	github.com/alecthomas/kong v1.17.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)
