export { acceptsConnections as isListening, freeLocalPort as freePort } from "../../components/host/ports";
