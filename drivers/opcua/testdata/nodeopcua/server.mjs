// An OPC-UA server of another implementation (node-opcua), offering
// Basic256Sha256 with Sign and SignAndEncrypt, for the driver's secure
// channel test. Usage: node server.mjs PORT PKI_DIR
// It prints one JSON line when it listens: {"endpoint", "thumbprint"},
// the thumbprint being the SHA-256 of its certificate (DER), in hex.
// It trusts any client certificate, as a PLC told to trust the gateway.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import server_ from "node-opcua-server";
import variant from "node-opcua-variant";
import status from "node-opcua-status-code";
import channel from "node-opcua-secure-channel";
import certificates from "node-opcua-certificate-manager";

// node-opcua is CommonJS: its names come from the default exports.
const { OPCUAServer } = server_;
const { Variant, DataType } = variant;
const { StatusCodes } = status;
const { SecurityPolicy, MessageSecurityMode } = channel;
const { OPCUACertificateManager } = certificates;

const [port, pki] = process.argv.slice(2);
const serverCertificateManager = new OPCUACertificateManager({ rootFolder: join(pki, "own"), automaticallyAcceptUnknownCertificate: true });
const userCertificateManager = new OPCUACertificateManager({ rootFolder: join(pki, "user"), automaticallyAcceptUnknownCertificate: true });
const server = new OPCUAServer({
  port: Number(port),
  hostname: "127.0.0.1",
  serverCertificateManager,
  userCertificateManager,
  securityPolicies: [SecurityPolicy.None, SecurityPolicy.Basic256Sha256],
  securityModes: [MessageSecurityMode.None, MessageSecurityMode.Sign, MessageSecurityMode.SignAndEncrypt],
  allowAnonymous: true,
  buildInfo: { productName: "independent-plc" },
});
await server.initialize();

const ns = server.engine.addressSpace.getOwnNamespace();
const plc = ns.addObject({ organizedBy: server.engine.addressSpace.rootFolder.objects, browseName: "PLC" });
let level = 1.5, command = false;
ns.addVariable({
  componentOf: plc, browseName: "Tank.Level", nodeId: "s=Tank.Level", dataType: "Double", minimumSamplingInterval: 100,
  value: { get: () => new Variant({ dataType: DataType.Double, value: level }) },
});
ns.addVariable({
  componentOf: plc, browseName: "Pump.Command", nodeId: "s=Pump.Command", dataType: "Boolean", minimumSamplingInterval: 100,
  accessLevel: "CurrentRead | CurrentWrite", userAccessLevel: "CurrentRead | CurrentWrite",
  value: {
    get: () => new Variant({ dataType: DataType.Boolean, value: command }),
    set: (v) => { command = v.value; level += command ? 0.5 : 0; return StatusCodes.Good; },
  },
});
ns.addVariable({
  componentOf: plc, browseName: "Pump.Running", nodeId: "s=Pump.Running", dataType: "Boolean", minimumSamplingInterval: 100,
  value: { get: () => new Variant({ dataType: DataType.Boolean, value: command }) },
});

// Each session says on which channel it came: the test checks that the
// client really signed, or signed and encrypted.
server.on("session_activated", (session) => {
  const ch = session.channel;
  console.log(JSON.stringify({ session: { policy: ch.securityPolicy, mode: MessageSecurityMode[ch.securityMode] } }));
});
await server.start();
const pem = readFileSync(server.certificateFile, "utf8");
const der = Buffer.from(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""), "base64");
const endpoint = server.getEndpointUrl().replace(/\/\/[^:/]+:/, "//127.0.0.1:");
console.log(JSON.stringify({ endpoint, thumbprint: createHash("sha256").update(der).digest("hex") }));
const stop = async () => { await server.shutdown(0); process.exit(0); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop); // the test's end closes our stdin
process.stdin.resume();
