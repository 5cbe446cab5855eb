"""The connection every client shares: where to connect and as whom (`target`), what `stello up`
saved (`credentials`), the programs' connection flags (`flags`), the SDK's channel (`channel`)."""
