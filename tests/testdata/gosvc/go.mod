module profilink.test/gosvc

go 1.19
