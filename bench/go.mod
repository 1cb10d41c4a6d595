module github.com/flakeid/flakeid/bench

go 1.26.0

replace github.com/flakeid/flakeid => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/flakeid/flakeid v0.0.0-00010101000000-000000000000
	github.com/google/uuid v1.6.0
	github.com/oklog/ulid/v2 v2.1.1
	github.com/rs/xid v1.6.0
	github.com/segmentio/ksuid v1.0.4
	github.com/sony/sonyflake v1.2.0
	github.com/yitter/idgenerator-go v1.3.3
)
